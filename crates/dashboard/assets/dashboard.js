// Progressive: hide fields that do not apply, copy tags, drop a kept upload when a new file
// is chosen. Without it every field shows.
(function () {
  function update() {
    document.querySelectorAll("[data-when]").forEach(function (field) {
      var source = document.querySelector('[name="' + field.dataset.when + '"]');
      if (!source) return;
      var wanted = field.dataset.whenValue;
      field.hidden = wanted === "*" ? source.value === "" : source.value !== wanted;
    });
    // A goal's amount is money only for a spend goal: the currency's symbol follows the metric.
    var metric = document.querySelector('[name="goal.metric"]');
    document.querySelectorAll(".unit[data-spend-only]").forEach(function (unit) {
      unit.hidden = !metric || metric.value !== "spend";
    });
  }
  // A targeting row whose attribute has fixed values shows their select instead of its text
  // (the text stays when it holds something, so nothing typed is hidden).
  function rows(event) {
    document.querySelectorAll(".row.targeting").forEach(function (row) {
      var attribute = row.querySelector('[name="t_attr"]');
      var text = row.querySelector('[name="t_values"]');
      var chosen = false;
      row.querySelectorAll("select[data-choices]").forEach(function (select) {
        select.hidden = select.dataset.choices !== attribute.value;
        chosen = chosen || !select.hidden;
      });
      if (chosen && event && event.target === attribute) text.value = "";
      text.hidden = chosen && text.value === "";
    });
  }
  // A new file chosen replaces the image a refused form kept: the kept one is not posted
  // again (both together could pass the form's size limit).
  function replaceKept(event) {
    var kept = document.getElementById("kept-upload");
    if (kept && event.target.id === "f-image_file" && event.target.files.length > 0) kept.remove();
  }
  document.addEventListener("change", function (event) { update(); rows(event); replaceKept(event); });
  update();
  rows(null);
  // A refused form: the summary of its errors takes the focus, so it is read first.
  var summary = document.getElementById("error-summary");
  if (summary) summary.focus();
  // A list's "select every row shown" box.
  var all = document.getElementById("select-all");
  if (all) all.addEventListener("change", function () {
    document.querySelectorAll("#bulk input[name=id]").forEach(function (box) { box.checked = all.checked; });
  });
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var text = document.getElementById(button.dataset.copy).value;
      navigator.clipboard.writeText(text).then(function () { button.textContent = "Copied"; });
    });
  });
})();
