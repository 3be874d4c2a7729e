import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  // Relative asset URLs: dist/ works from any folder of any static host.
  base: "./",
  plugins: [react()],
});
