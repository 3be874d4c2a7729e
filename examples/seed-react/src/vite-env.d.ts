/// <reference types="vite/client" />

// Types for the hook imported from the platform's URL, from the npm package.
declare module "*/react.js" { export * from "voice-agent/react"; }
