// Starts the notebook. The page names the module's content-hashed files (data-module); both are
// fetched relative to document.baseURI, so the page works at `/` and under any proxy prefix.
const name = document.querySelector("script[data-module]").dataset.module;
const url = (suffix) => new URL(name + suffix, document.baseURI);
import(url(".js"))
  .then((glue) => glue.default({ module_or_path: url("_bg.wasm") }))
  .catch((e) => { document.getElementById("loading").textContent = "Scalebook failed to start: " + e; });
