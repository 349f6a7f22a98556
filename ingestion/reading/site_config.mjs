// Evaluates a Docusaurus site config the way Docusaurus 3 does, for ingestion/reading/site_config.py.
//
//   node site_config.mjs <config file>
//
// Loads the config with the jiti that the site's @docusaurus/utils uses (Docusaurus's loadFreshModule:
// interopDefault, no require cache), else (no jiti installed, or jiti fails on a .js/.mjs/.cjs) import();
// calls it when it is a function (with no arguments) and awaits it (Docusaurus's loadSiteConfig).
// Prints exactly one line of JSON to stdout and nothing else: the config module's own output goes to
// stderr. Only JSON-able data leaves: functions and other values become {"__type__": "<typeof>"}.
//
//   {"ok": true, "loader": "jiti 1.21.7" | "import", "config": {title, url, baseUrl, ...}}
//   {"ok": false, "stage": "load" | "call" | "shape", "error": "<first line of the error>"}

import { createRequire } from 'node:module';
import { basename, extname } from 'node:path';
import { pathToFileURL } from 'node:url';

const MAX_DEPTH = 8;
const MAX_ITEMS = 200;
const MAX_STRING = 10000;

const stdoutWrite = process.stdout.write.bind(process.stdout);
const realExit = process.exit;

function quiet() {
  // Everything the config prints (console.log, process.stdout.write) goes to stderr instead.
  process.stdout.write = (...args) => process.stderr.write(...args);
  for (const name of ['log', 'info', 'debug', 'dir', 'table']) console[name] = (...args) => console.error(...args);
  process.exit = (code) => {
    throw new Error(`the config called process.exit(${code ?? ''})`);
  };
}

function reply(result) {
  process.exit = realExit;
  stdoutWrite(`${JSON.stringify(result)}\n`, () => realExit(0));
}

function firstLine(error, configPath) {
  if (!(error instanceof Error)) return String(error).split('\n')[0].trim().slice(0, 500);
  const message = String(error.message);
  let line = message.split('\n').find((part) => part.trim())?.trim() ?? '';
  if (error.name !== 'Error') line = `${error.name}: ${line}`;
  // Where in the config: jiti writes "<file>:<line>:<column>" under its message, a throw has it in its stack.
  const name = basename(configPath);
  const at = `${message}\n${error.stack}`.split(name + ':')[1]?.match(/^(\d+)/);
  if (at && !line.includes(name)) line += ` (${name} line ${at[1]})`;
  // jiti and Docusaurus wrap errors: the cause says what went wrong.
  if (error.cause) line += ` (${firstLine(error.cause, configPath)})`;
  return line.slice(0, 500);
}

function findJiti(configPath) {
  const siteRequire = createRequire(configPath);
  const candidates = [];
  try {
    // The jiti Docusaurus itself loads the config with, when @docusaurus/utils has one of its own.
    candidates.push(createRequire(siteRequire.resolve('@docusaurus/utils')).resolve('jiti'));
  } catch {}
  try {
    candidates.push(siteRequire.resolve('jiti'));
  } catch {}
  for (const path of candidates) {
    try {
      const jiti = siteRequire(path);
      let version = '';
      try {
        version = createRequire(path)('jiti/package.json').version;
      } catch {}
      return { jiti, version };
    } catch {}
  }
  return null;
}

async function importModule(configPath) {
  const module = await import(pathToFileURL(configPath).href);
  return { loader: 'import', value: module.default !== undefined ? module.default : module };
}

async function loadModule(configPath) {
  const typescript = ['.ts', '.mts', '.cts'].includes(extname(configPath));
  const found = findJiti(configPath);
  if (!found) {
    if (typescript) throw new Error('Node cannot load a TypeScript config without jiti, which Docusaurus installs');
    return importModule(configPath);
  }
  const { jiti, version } = found;
  try {
    // No transpile cache on disk: reading a config must not write into the site.
    if (typeof jiti.createJiti === 'function') {
      // jiti 2
      const load = jiti.createJiti(configPath, { interopDefault: true, moduleCache: false, fsCache: false });
      return { loader: `jiti ${version}`, value: await load.import(configPath, { default: true }) };
    }
    const factory = typeof jiti === 'function' ? jiti : jiti.default;
    const load = factory(configPath, { interopDefault: true, requireCache: false, cache: false });
    return { loader: `jiti ${version}`, value: load(configPath) };
  } catch (error) {
    // Node may manage what this jiti can't (jiti 1 has no top-level await); else jiti's error is Docusaurus's.
    if (typescript) throw error;
    try {
      return await importModule(configPath);
    } catch {
      throw error;
    }
  }
}

function plain(value, depth = 0, seen = new Set()) {
  if (value === null || typeof value === 'boolean' || typeof value === 'number') {
    return typeof value === 'number' && !Number.isFinite(value) ? { __type__: 'number' } : value;
  }
  if (typeof value === 'string') return value.length > MAX_STRING ? value.slice(0, MAX_STRING) : value;
  if (typeof value !== 'object' || depth >= MAX_DEPTH || seen.has(value)) {
    return { __type__: Array.isArray(value) ? 'array' : typeof value };
  }
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      return value.slice(0, MAX_ITEMS).map((item) => (item === undefined ? null : plain(item, depth + 1, seen)));
    }
    const out = {};
    for (const key of Object.keys(value).slice(0, MAX_ITEMS)) {
      try {
        const item = value[key];
        if (item !== undefined) out[key] = plain(item, depth + 1, seen);
      } catch {
        out[key] = { __type__: 'unreadable property' };
      }
    }
    return out;
  } finally {
    seen.delete(value);
  }
}

function pick(config) {
  // Only what bookchat reads, plus presets/plugins (their names and options decide the docs instances).
  const keys = ['title', 'url', 'baseUrl', 'trailingSlash', 'i18n', 'presets', 'plugins'];
  const out = {};
  for (const key of keys) {
    if (config[key] !== undefined) out[key] = plain(config[key]);
  }
  return out;
}

async function main() {
  const configPath = process.argv[2];
  quiet();
  let loaded;
  try {
    loaded = await loadModule(configPath);
  } catch (error) {
    return reply({ ok: false, stage: 'load', error: firstLine(error, configPath) });
  }
  let config;
  try {
    config = typeof loaded.value === 'function' ? await loaded.value() : await loaded.value;
  } catch (error) {
    return reply({ ok: false, stage: 'call', error: firstLine(error, configPath) });
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    const got = config === null ? 'null' : Array.isArray(config) ? 'an array' : typeof config;
    return reply({ ok: false, stage: 'shape', error: `the config is ${got}, not an object` });
  }
  let picked;
  try {
    picked = pick(config);
  } catch (error) {
    return reply({ ok: false, stage: 'call', error: firstLine(error, configPath) });
  }
  return reply({ ok: true, loader: loaded.loader, config: picked });
}

main().catch((error) => reply({ ok: false, stage: 'load', error: firstLine(error, process.argv[2]) }));
