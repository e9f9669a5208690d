// Not npm's file: it gives tsc (tests/js/tsconfig.page.json) the package's own types for purify.es.mjs.
export * from "dompurify";
export { default } from "dompurify";
