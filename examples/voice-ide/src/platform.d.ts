// Types of the module the platform serves at ${PLATFORM}/client.js: the library's own
// declarations (frontend/lib in this repository, reached through "paths" in tsconfig.json).
// The module is imported at run time from the platform, never bundled. Copying this example
// out of the repository: `npm install -D https://PLATFORM/sdk/voice-agent.tgz` and delete
// "paths" from tsconfig.json.
import type { VoiceAgent } from "voice-agent";

export type * from "voice-agent";

/** A running conversation, as `VoiceAgent.start` returns it. */
export type VoiceAgentHandle = VoiceAgent;

/** The module at ${PLATFORM}/client.js. */
export type ClientLibrary = typeof import("voice-agent");
