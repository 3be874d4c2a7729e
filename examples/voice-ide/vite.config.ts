import { defineConfig } from "vite";

export default defineConfig({
  // Relative asset URLs: dist/ works from any folder of any static host.
  base: "./",
  worker: { format: "es" },
  // Monaco's editor is one ~3 MB module graph; splitting it buys nothing here.
  build: { chunkSizeWarningLimit: 3500 },
});
