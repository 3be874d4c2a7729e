import { createRoot } from "react-dom/client";
import { PLATFORM_URL } from "./env";
import "./styles.css";

const root = createRoot(document.getElementById("root")!);

// App is imported dynamically so that a platform that cannot be reached (voice.ts awaits
// the library) shows a sentence instead of a blank page.
import("./App").then(
  ({ default: App }) => root.render(<App />),
  (err: unknown) =>
    root.render(
      <p className="load-error" role="alert">
        Could not load the voice library from {PLATFORM_URL}:{" "}
        {err instanceof Error ? err.message : String(err)}
      </p>,
    ),
);
