// How the playground's event log names a server event: its wire type, except where that
// reads like a failure when it is not (a `cancelled` after the user spoke over the agent).
const CANCELLED = {
  cancel: ["barge-in", "the page asked to stop (the user spoke over the agent)"],
  barge_in: ["barge-in", "the server heard the user speak over the agent"],
  new_turn: ["cancelled", "a new turn replaced the reply"],
  reset: ["cancelled", "the conversation was reset"],
};

/** `[name, note]` for `event`: the log line's label, and words before its fields ("" if none). */
export function eventLabel(event) {
  const known = event.type === "cancelled" ? CANCELLED[event.reason] : undefined;
  return known ?? [event.type, ""];
}
