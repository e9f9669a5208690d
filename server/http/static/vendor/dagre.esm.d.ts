// Not npm's file: it gives tsc (tests/js/tsconfig.page.json) the package's own types for dagre.esm.js.
export * from "@dagrejs/dagre";
export { default } from "@dagrejs/dagre";
