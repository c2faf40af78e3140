export * from "./wire.js";
