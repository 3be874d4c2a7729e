// Where this library was loaded from: its origin is the default platform, and the audio
// worklets sit next to it. The npm package the platform builds (/sdk/voice-agent.tgz)
// replaces this one line with the platform's own URL, so a bundled copy still finds both.

export const LIBRARY_URL = import.meta.url;
