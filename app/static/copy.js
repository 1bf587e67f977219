// "Copy" buttons: data-copy names the input whose value goes to the clipboard.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button) return;
  var input = document.getElementById(button.dataset.copy);
  input.select();
  var done = function () { button.textContent = "Copied"; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(input.value).then(done, function () { document.execCommand("copy"); done(); });
  } else {
    document.execCommand("copy");
    done();
  }
});
