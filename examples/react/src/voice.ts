// Loads the platform's React hook at run time: the library is served by the platform
// (${PLATFORM_URL}/react.js) and never bundled, so Vite is told to leave the import alone.
import * as React from "react";
import { PLATFORM_URL } from "./env";
import type { ReactLibrary } from "./platform";

const lib: ReactLibrary = await import(/* @vite-ignore */ `${PLATFORM_URL}/react.js`);

// react.js cannot import "react" itself (it comes from another origin): it is handed ours.
export const useVoiceAgent = lib.bindReact(React);
