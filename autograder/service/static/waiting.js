// The waiting page (templates/submission.html): ask the service every 2 s what became of the
// submission, say it in the page's live region (a screen reader reads the change), and reload
// the page once it is graded (or set aside), to show the score. Only this page's own element.
(() => {
  const state = document.getElementById("state");
  const id = state && state.dataset.submission;
  if (!id) return;
  const poll = async () => {
    try {
      const reply = await fetch(`/api/submissions/${id}`, {headers: {Accept: "application/json"}});
      if (reply.ok) {
        const sub = await reply.json();
        if (sub.state !== "queued" && sub.state !== "grading") return location.reload();
        const said = sub.state + (sub.queue_position ? `: number ${sub.queue_position} in the queue` : "") +
          ". This page shows the score by itself once graded.";
        if (state.textContent !== said) state.textContent = said;
      }
    } catch (err) { /* the service restarting: ask again */ }
    setTimeout(poll, 2000);
  };
  setTimeout(poll, 2000);
})();
