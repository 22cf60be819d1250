// Progressive: hide fields that do not apply, copy tags. Without it every field shows.
(function () {
  function update() {
    document.querySelectorAll("[data-when]").forEach(function (field) {
      var source = document.querySelector('[name="' + field.dataset.when + '"]');
      if (!source) return;
      var wanted = field.dataset.whenValue;
      field.hidden = wanted === "*" ? source.value === "" : source.value !== wanted;
    });
  }
  document.addEventListener("change", update);
  update();
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var text = document.getElementById(button.dataset.copy).value;
      navigator.clipboard.writeText(text).then(function () { button.textContent = "Copied"; });
    });
  });
})();
