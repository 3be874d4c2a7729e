// The session page's recording: the transcript line being spoken is highlighted as the
// audio plays (each line's data-at: its second on the recording), and a click on a line
// plays from there.
(() => {
  "use strict";
  const audio = document.querySelector("audio[data-follows]");
  if (!audio) return;
  const lines = [...document.querySelectorAll(`${audio.dataset.follows} [data-at]`)];
  let current = null;

  const follow = () => {
    let speaking = null;
    for (const line of lines) {
      if (Number(line.dataset.at) > audio.currentTime) break;
      speaking = line;
    }
    if (speaking === current) return;
    if (current) {
      current.classList.remove("speaking");
      current.removeAttribute("aria-current");
    }
    if (speaking) {
      speaking.classList.add("speaking");
      speaking.setAttribute("aria-current", "true");
      speaking.scrollIntoView({ block: "nearest" });
    }
    current = speaking;
  };

  audio.addEventListener("timeupdate", follow);
  audio.addEventListener("seeked", follow);
  for (const line of lines) {
    line.addEventListener("click", () => {
      audio.currentTime = Number(line.dataset.at);
      audio.play();
    });
  }
})();
