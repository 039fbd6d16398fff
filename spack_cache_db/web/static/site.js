// spack-cache-db: the Copy buttons put their commands on the clipboard.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.spack-copy");
  if (!button) return;
  event.preventDefault(); // a button in a summary copies; it does not open or close the details
  try {
    await navigator.clipboard.writeText(button.dataset.copy);
    button.textContent = "Copied";
  } catch (error) {
    button.textContent = "Select and copy";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
});
