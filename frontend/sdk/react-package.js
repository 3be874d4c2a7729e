// `voice-agent/react` in the npm package: an installed package can import the app's own
// React, so the hook needs no setup at all.
import * as React from "react";
import { bindReact } from "./react-hook.js";

export { bindReact };

/** The hook on the app's React. */
export const useVoiceAgent = bindReact(React);
