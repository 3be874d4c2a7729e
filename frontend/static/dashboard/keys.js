// Hides the publishable-only limits while "secret" is chosen; without JS they stay visible
// and the server ignores them for secret keys.
document.addEventListener("DOMContentLoaded", () => {
  const limits = document.querySelector("fieldset.publishable-only");
  const radios = document.querySelectorAll('input[name="kind"]');
  if (!limits || !radios.length) return;
  const sync = () => {
    const checked = document.querySelector('input[name="kind"]:checked');
    limits.hidden = checked !== null && checked.value === "secret";
  };
  radios.forEach((radio) => radio.addEventListener("change", sync));
  sync();
});
