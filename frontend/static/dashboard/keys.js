// Shows the limits of the chosen kind only (publishable: origins, agents, what pages may
// send; secret: scopes); without JS both stay visible and the server ignores the other's.
document.addEventListener("DOMContentLoaded", () => {
  const publishable = document.querySelector("fieldset.publishable-only");
  const secret = document.querySelector("fieldset.secret-only");
  const radios = document.querySelectorAll('input[name="kind"]');
  if (!publishable || !radios.length) return;
  const sync = () => {
    const checked = document.querySelector('input[name="kind"]:checked');
    const isSecret = checked !== null && checked.value === "secret";
    publishable.hidden = isSecret;
    if (secret) secret.hidden = !isSecret;
  };
  radios.forEach((radio) => radio.addEventListener("change", sync));
  sync();
});
