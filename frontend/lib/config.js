// What `configure` sends: tool declarations (server handlers as source), variables, the URL.

const PROTOCOL_PATH = "/v1/session";


/**
 * A function's source as a function *expression* (method shorthand gets `function`).
 * @param {Function | string} handler
 */
export function functionSource(handler) {
  const source = typeof handler === "function" ? handler.toString() : String(handler);
  const expression = /^(async\b\s*)?(function\b|\(|[A-Za-z_$][\w$]*\s*=>)/; // `async(e)=>` too (minified)
  if (expression.test(source.trim())) return source;
  return source.trim().replace(/^(async\s+)?/, (prefix) => `${prefix}function `); // `async name(a) {…}`
}

export function pick(object, ...keys) {
  return Object.fromEntries(keys.map((key) => [key, object[key]]));
}

export function withoutUndefined(object) {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined));
}

/** `tools` and `clientTools` as `configure` declares them. */
export function toolDeclarations(tools = {}, clientTools = {}) {
  const server = Object.entries(tools ?? {}).map(([name, tool]) =>
    withoutUndefined({
      name,
      description: tool.description,
      parameters: tool.parameters,
      handler: functionSource(tool.handler),
      timeoutMs: tool.timeoutMs,
    }),
  );
  const client = Object.entries(clientTools ?? {}).map(([name, tool]) =>
    withoutUndefined({
      name,
      description: tool.description,
      parameters: tool.parameters,
      client: true,
      timeoutMs: tool.timeoutMs,
    }),
  );
  return [...server, ...client];
}

export function stringValues(variables) {
  if (!variables) return undefined;
  return Object.fromEntries(Object.entries(variables).map(([key, value]) => [key, String(value)]));
}

/**
 * `ws(s)://HOST[/prefix]/v1/session?key=…[&agent=…]` (or `?token=…` for a session token)
 * from the platform's http(s) URL.
 */
export function sessionUrl(platformUrl, apiKey, agent, token) {
  const url = new URL(platformUrl);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.pathname = url.pathname.replace(/\/+$/, "") + PROTOCOL_PATH;
  url.search = "";
  url.hash = "";
  if (token) url.searchParams.set("token", token);
  else url.searchParams.set("key", apiKey);
  if (agent) url.searchParams.set("agent", agent);
  return url.toString();
}

/** Whether the options name a way in: a publishable key, a session token, or `getToken`. */
export function hasCredential(options) {
  return Boolean(options.apiKey || options.token || typeof options.getToken === "function");
}

/**
 * The URL of each new socket, as an async function. A session token is single use, so
 * with `getToken` every socket (a reconnect that resumes too) asks the page's server for
 * a fresh one; a fixed `token` serves the first socket only.
 */
export function sessionUrlSource({ platformUrl, apiKey, agent, token, getToken }) {
  if (typeof getToken === "function") {
    return async () => sessionUrl(platformUrl, undefined, agent, await getToken());
  }
  return async () => sessionUrl(platformUrl, apiKey, agent, token);
}

