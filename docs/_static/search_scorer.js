// Sphinx search ranking for this site (html_search_scorer in conf.py): lessons first.
// A reader who types "mask" or "softmax" wants the lesson that teaches it, not the API
// entry or a section index. Every lesson that matches comes before every other page; among
// the lessons, those whose title names the query come first, and of those the ones whose
// title starts with it ("Softmax: ..." before "Flash attention: ... online softmax").
const queryWords = () =>
  (new URLSearchParams(window.location.search).get("q") || "")
    .toLowerCase()
    .split(/\s+/)
    .filter((word) => word.length > 0);

var Scorer = {
  score: (result) => {
    const [docname, title, , , score] = result;
    const isLesson = docname.startsWith("auto_examples/") && !docname.endsWith("/index");
    if (!isLesson) return score;
    const words = queryWords();
    const titleLower = (title || "").toLowerCase();
    const head = titleLower.split(":")[0];
    let bonus = 100;
    if (words.length && words.every((word) => titleLower.includes(word))) bonus += 25;
    if (words.length && words.every((word) => head.includes(word))) bonus += 25;
    return score + bonus;
  },
  // Sphinx's defaults below.
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
