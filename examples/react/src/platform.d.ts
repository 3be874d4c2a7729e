// Types of the modules the platform serves at ${PLATFORM}/client.js and /react.js: the
// library's own declarations (frontend/lib in this repository, reached through "paths" in
// tsconfig.json). The modules are imported at run time from the platform, never bundled.
// Copying this example out of the repository: `npm install -D
// https://PLATFORM/sdk/voice-agent.tgz` and delete "paths" from tsconfig.json.
export type * from "voice-agent";
export type * from "voice-agent/react";

/** The module at ${PLATFORM}/react.js. */
export type ReactLibrary = typeof import("voice-agent/react");
