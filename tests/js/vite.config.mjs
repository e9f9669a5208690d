// `vite build` of page/ (the useStream test page) into the directory given by PAGE_OUT (never committed).
import { defineConfig } from "vite";

export default defineConfig({
  root: "page",
  base: "./",
  logLevel: "error",
  build: { outDir: process.env.PAGE_OUT ?? "../dist/page", emptyOutDir: true },
});
