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

// The socket's scheme for each platform URL scheme: a secure URL stays secure.
const SOCKET_SCHEMES = { "https:": "wss:", "wss:": "wss:", "http:": "ws:", "ws:": "ws:" };

/**
 * The platform URL checked: http(s) or ws(s), and secure when the page is.
 * @param {string} platformUrl
 * @returns {URL}
 * @throws {TypeError} saying what is wrong with it
 */
export function checkedPlatformUrl(platformUrl) {
  let url;
  try {
    url = new URL(String(platformUrl));
  } catch {
    throw new TypeError(`voice agent: platformUrl ${JSON.stringify(String(platformUrl))} is not a URL`);
  }
  if (!SOCKET_SCHEMES[url.protocol]) {
    throw new TypeError(
      `voice agent: platformUrl must start with https://, wss://, http:// or ws://, not ${url.protocol}//`,
    );
  }
  const securePage = globalThis.location?.protocol === "https:";
  if (securePage && SOCKET_SCHEMES[url.protocol] !== "wss:") {
    throw new TypeError(
      "voice agent: this page is served over https, so the browser only allows a secure " +
        `connection: use an https:// or wss:// platformUrl, not ${url.origin}`,
    );
  }
  return url;
}

/**
 * `ws(s)://HOST[/prefix]/v1/session?key=…[&agent=…]` (or `?token=…` for a session token)
 * from the platform's URL.
 */
export function sessionUrl(platformUrl, apiKey, agent, token) {
  const url = checkedPlatformUrl(platformUrl);
  url.protocol = SOCKET_SCHEMES[url.protocol];
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

