import fs from "node:fs";
import path from "node:path";
import { EventEmitter } from "node:events";

const yaml = require("yaml");

const DEFAULT_OPTIONS = { encoding: "utf8", watch: false };

export function readConfig(file, options = DEFAULT_OPTIONS) {
  const text = fs.readFileSync(file, options.encoding);
  return file.endsWith(".yaml") ? yaml.parse(text) : JSON.parse(text);
}

const resolveFrom = (base, relative) => {
  return path.resolve(path.dirname(base), relative);
};

export class ConfigStore extends EventEmitter {
  constructor(root) {
    super();
    this.root = root;
    this.cache = new Map();
  }

  get size() {
    return this.cache.size;
  }

  load(name) {
    if (this.cache.has(name)) {
      return this.cache.get(name);
    }
    const file = resolveFrom(this.root, `${name}.json`);
    // cursor here
    const config = readConfig(file);
    this.cache.set(name, config);
    this.emit("load", name, config);
    return config;
  }

  clear() {
    this.cache.clear();
    this.emit("clear");
  }
}

function* walk(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      yield* walk(full);
    } else {
      yield full;
    }
  }
}

export default ConfigStore;
