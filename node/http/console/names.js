// How the console names exchanges: the default exchange is "" in the API's
// JSON, "amq.default" in its paths (as RabbitMQ's), "(AMQP default)" on screen.

export const DEFAULT_EXCHANGE_PATH = "amq.default";

export function exchangeSegment(name) {
  return encodeURIComponent(name === "" ? DEFAULT_EXCHANGE_PATH : name);
}

export function exchangeLabel(name) {
  return name === "" ? "(AMQP default)" : name;
}

// The console route of one exchange (#/exchange/<vhost>/<name>).
export function exchangeHash(vhost, name) {
  return `#/exchange/${encodeURIComponent(vhost)}/${encodeURIComponent(name === "" ? DEFAULT_EXCHANGE_PATH : name)}`;
}
