// Baked in at build time from VITE_* variables (.env, .env.local or the shell).
export const PLATFORM_URL: string = (
  import.meta.env.VITE_PLATFORM_URL || "http://127.0.0.1:8000"
).replace(/\/+$/, "");

export const PUBLISHABLE_KEY: string = import.meta.env.VITE_PUBLISHABLE_KEY || "";
