// Not npm's file: it gives tsc (tests/js/tsconfig.page.json) the package's own types for marked.esm.js.
export * from "marked";
