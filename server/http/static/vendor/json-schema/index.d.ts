// Not npm's file: it gives tsc (tests/js/tsconfig.page.json) the package's own types for index.js.
export * from "@cfworker/json-schema";
