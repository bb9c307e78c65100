/*
 * stream_tool: the stream half of the benchmark clients, on the Qpid Proton C
 * proactor like arrow (which has no source filters or message annotations).
 *
 *   stream_tool fill -P port -a address -c count [-b body] [-w window] [-V values] [-R run]
 *   stream_tool read -P port -a address -c count [-o offset-spec] [-f value] [-F value] [-C credit]
 *
 * fill: sends -c durable messages, at most -w unsettled; message i carries the
 *       message annotation x-stream-filter-value = "v<(i / run) % values>".
 * read: attaches with the source filter rabbitmq:stream-offset-spec = -o (first,
 *       last, next, or a number: an offset), as a plain value (the form RabbitMQ
 *       3.10's AMQP 1.0 plugin maps to x-stream-offset); -f V adds
 *       rabbitmq:stream-filter = V (the broker filters); -F V counts only the
 *       messages annotated V, decoding each (a client filtering by itself).
 *       Grants -C credit, tops it up at half, settles every message accepted,
 *       stops after -c (matching) messages.
 * Prints one JSON line: count, done, received, seconds, rate (done per second,
 * attach to last message for read, first send to last outcome for fill),
 * t_attach, t_first, t_last. Exit code 0 only when the count was reached.
 */
#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FILTER_VALUE "x-stream-filter-value"

typedef struct {
  bool fill;
  const char *port, *address, *offset, *filter, *client_filter;
  long count, body_size, credit, window, values, run;
  pn_proactor_t *proactor;
  pn_message_t *message;
  pn_rwbytes_t buf;
  char *body;
  long sent, settled, accepted, received, done;
  double t_attach, t_first, t_last, t_activity, idle_timeout;
  int failed;
  char error[512];
} app_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(app_t *a, pn_condition_t *c) {
  if (pn_condition_is_set(c)) {
    const char *desc = pn_condition_get_description(c);
    snprintf(a->error, sizeof a->error, "%s: %s", pn_condition_get_name(c), desc ? desc : "");
    a->failed = 1;
  }
}

static void put_symbol_key(pn_data_t *d, const char *key) { pn_data_put_symbol(d, pn_bytes(strlen(key), key)); }

static void set_filters(app_t *a, pn_link_t *l) {
  pn_data_t *f = pn_terminus_filter(pn_link_source(l));
  pn_data_put_map(f);
  pn_data_enter(f);
  put_symbol_key(f, "rabbitmq:stream-offset-spec");
  char *end;
  long long offset = strtoll(a->offset, &end, 10);
  if (*a->offset && !*end)
    pn_data_put_ulong(f, (uint64_t)offset);
  else
    pn_data_put_string(f, pn_bytes(strlen(a->offset), a->offset));
  if (a->filter) {
    put_symbol_key(f, "rabbitmq:stream-filter");
    pn_data_put_string(f, pn_bytes(strlen(a->filter), a->filter));
  }
  pn_data_exit(f);
}

static void send_one(app_t *a, pn_link_t *l) {
  char tag[24], value[24];
  snprintf(tag, sizeof tag, "%ld", a->sent);
  snprintf(value, sizeof value, "v%ld", (a->sent / a->run) % a->values);
  pn_message_clear(a->message);
  pn_message_set_durable(a->message, true);
  pn_data_t *ann = pn_message_annotations(a->message);
  pn_data_put_map(ann);
  pn_data_enter(ann);
  put_symbol_key(ann, FILTER_VALUE);
  pn_data_put_string(ann, pn_bytes(strlen(value), value));
  pn_data_exit(ann);
  pn_data_t *body = pn_message_body(a->message);
  pn_data_put_binary(body, pn_bytes(a->body_size, a->body));
  pn_delivery(l, pn_dtag(tag, strlen(tag)));
  if (pn_message_send(a->message, l, &a->buf) < 0) {
    snprintf(a->error, sizeof a->error, "send: %s", pn_error_text(pn_message_error(a->message)));
    a->failed = 1;
  }
  if (a->t_first == 0) a->t_first = now();
  a->sent++;
}

static void pump(app_t *a, pn_link_t *l) {
  while (!a->failed && pn_link_credit(l) > 0 && a->sent < a->count && a->sent - a->settled < a->window)
    send_one(a, l);
}

/* Whether a received message is annotated with the client filter's value. */
static bool matches(app_t *a, const char *bytes, size_t n) {
  pn_message_clear(a->message);
  if (pn_message_decode(a->message, bytes, n) != 0) return false;
  pn_data_t *ann = pn_message_annotations(a->message);
  pn_data_rewind(ann);
  if (!pn_data_next(ann) || pn_data_type(ann) != PN_MAP) return false;
  size_t entries = pn_data_get_map(ann);
  pn_data_enter(ann);
  for (size_t i = 0; i + 1 < entries; i += 2) {
    pn_data_next(ann);
    pn_bytes_t k = pn_data_type(ann) == PN_SYMBOL ? pn_data_get_symbol(ann) : pn_bytes(0, NULL);
    bool key = k.size == strlen(FILTER_VALUE) && !memcmp(k.start, FILTER_VALUE, k.size);
    pn_data_next(ann);
    if (key && pn_data_type(ann) == PN_STRING) {
      pn_bytes_t v = pn_data_get_string(ann);
      return v.size == strlen(a->client_filter) && !memcmp(v.start, a->client_filter, v.size);
    }
  }
  return false;
}

static void received(app_t *a, pn_event_t *e, pn_delivery_t *d) {
  pn_link_t *l = pn_delivery_link(d);
  size_t size = pn_delivery_pending(d);
  if (a->buf.size < size) {
    a->buf.start = realloc(a->buf.start, size);
    a->buf.size = size;
  }
  ssize_t n = pn_link_recv(l, a->buf.start, size);
  pn_link_advance(l);
  pn_delivery_update(d, PN_ACCEPTED);
  pn_delivery_settle(d);
  double t = now();
  if (a->received++ == 0) a->t_first = t;
  if (!a->client_filter || (n > 0 && matches(a, a->buf.start, n))) a->done++;
  if (a->done >= a->count) {
    a->t_last = t;
    pn_connection_close(pn_event_connection(e));
  } else if (pn_link_credit(l) < a->credit / 2) {
    pn_link_flow(l, a->credit - pn_link_credit(l));
  }
}

static bool handle(app_t *a, pn_event_t *e) {
  switch (pn_event_type(e)) {
  case PN_CONNECTION_INIT: {
    pn_connection_t *c = pn_event_connection(e);
    pn_connection_set_container(c, a->fill ? "stream-fill" : "stream-read");
    pn_connection_open(c);
    pn_session_t *s = pn_session(c);
    pn_session_set_incoming_capacity(s, 0);
    pn_session_open(s);
    pn_link_t *l = a->fill ? pn_sender(s, "stream-fill") : pn_receiver(s, "stream-read");
    if (a->fill) {
      pn_terminus_set_address(pn_link_target(l), a->address);
    } else {
      pn_terminus_set_address(pn_link_source(l), a->address);
      set_filters(a, l);
    }
    a->t_attach = now();
    pn_link_open(l);
    if (!a->fill) pn_link_flow(l, a->credit);
    break;
  }
  case PN_LINK_FLOW:
    if (a->fill) pump(a, pn_event_link(e));
    break;
  case PN_DELIVERY: {
    pn_delivery_t *d = pn_event_delivery(e);
    a->t_activity = now();
    if (a->fill) {
      if (!pn_delivery_updated(d)) break;
      if (pn_delivery_remote_state(d) == PN_ACCEPTED) a->accepted++;
      pn_delivery_settle(d);
      a->settled++;
      a->done = a->accepted;
      if (a->settled >= a->count) {
        a->t_last = now();
        pn_connection_close(pn_event_connection(e));
      } else {
        pump(a, pn_event_link(e));
      }
    } else if (a->done >= a->count) {
      pn_delivery_update(d, PN_RELEASED);
      pn_delivery_settle(d);
    } else if (pn_delivery_readable(d) && !pn_delivery_partial(d)) {
      received(a, e, d);
    }
    break;
  }
  case PN_TRANSPORT_CLOSED:
    fail(a, pn_transport_condition(pn_event_transport(e)));
    return false;
  case PN_CONNECTION_REMOTE_CLOSE:
    fail(a, pn_connection_remote_condition(pn_event_connection(e)));
    pn_connection_close(pn_event_connection(e));
    break;
  case PN_LINK_REMOTE_CLOSE:
  case PN_LINK_REMOTE_DETACH:
    fail(a, pn_link_remote_condition(pn_event_link(e)));
    pn_connection_close(pn_event_connection(e));
    break;
  case PN_PROACTOR_TIMEOUT:
    if (now() - a->t_activity > a->idle_timeout) {
      snprintf(a->error, sizeof a->error, "idle for %.0f s", a->idle_timeout);
      a->failed = 1;
      return false;
    }
    pn_proactor_set_timeout(a->proactor, 1000);
    break;
  case PN_PROACTOR_INACTIVE:
    return false;
  default:
    break;
  }
  return true;
}

int main(int argc, char **argv) {
  app_t a = {0};
  if (argc < 2 || (strcmp(argv[1], "fill") && strcmp(argv[1], "read"))) {
    fprintf(stderr, "usage: stream_tool fill|read -P port -a address -c count [-b body] [-w window] [-V values]"
                    " [-R run] [-o offset] [-f filter] [-F client-filter] [-C credit] [-t idle-s]\n");
    return 2;
  }
  a.fill = !strcmp(argv[1], "fill");
  a.port = "5672"; a.address = "/queues/s"; a.offset = "first";
  a.count = 100000; a.body_size = 12; a.credit = 1000; a.window = 1000; a.values = 100; a.run = 1;
  a.idle_timeout = 30;
  int o;
  optind = 2;
  while ((o = getopt(argc, argv, "P:a:c:b:w:V:R:o:f:F:C:t:")) != -1) {
    switch (o) {
    case 'P': a.port = optarg; break;
    case 'a': a.address = optarg; break;
    case 'c': a.count = atol(optarg); break;
    case 'b': a.body_size = atol(optarg); break;
    case 'w': a.window = atol(optarg); break;
    case 'V': a.values = atol(optarg); break;
    case 'R': a.run = atol(optarg); break;
    case 'o': a.offset = optarg; break;
    case 'f': a.filter = optarg; break;
    case 'F': a.client_filter = optarg; break;
    case 'C': a.credit = atol(optarg); break;
    case 't': a.idle_timeout = atof(optarg); break;
    default: return 2;
    }
  }
  if (a.values < 1) a.values = 1;
  if (a.run < 1) a.run = 1;
  a.body = calloc(1, a.body_size + 1);
  memset(a.body, 'x', a.body_size);
  a.message = pn_message();
  a.proactor = pn_proactor();
  a.t_activity = now();
  char addr[PN_MAX_ADDR];
  pn_proactor_addr(addr, sizeof addr, "127.0.0.1", a.port);
  pn_connection_t *c = pn_connection();
  pn_connection_set_user(c, "guest");
  pn_connection_set_password(c, "guest");
  pn_transport_t *t = pn_transport();
  pn_sasl_set_allow_insecure_mechs(pn_sasl(t), true);
  pn_proactor_connect2(a.proactor, c, t, addr);
  pn_proactor_set_timeout(a.proactor, 1000);
  bool go = true;
  while (go) {
    pn_event_batch_t *b = pn_proactor_wait(a.proactor);
    pn_event_t *e;
    while (go && (e = pn_event_batch_next(b))) go = handle(&a, e);
    pn_proactor_done(a.proactor, b);
  }
  double start = a.fill ? a.t_first : a.t_attach;
  double secs = a.t_last > start ? a.t_last - start : 0;
  printf("{\"mode\":\"%s\",\"address\":\"%s\",\"count\":%ld,\"done\":%ld,\"received\":%ld,\"seconds\":%.3f,"
         "\"rate\":%.0f,\"t_attach\":%.6f,\"t_first\":%.6f,\"t_last\":%.6f",
         argv[1], a.address, a.count, a.done, a.fill ? a.settled : a.received, secs, secs > 0 ? a.done / secs : 0.0,
         a.t_attach, a.t_first, a.t_last);
  if (a.failed) printf(",\"error\":\"%s\"", a.error);
  printf("}\n");
  return (a.done >= a.count && !a.failed) ? 0 : 1;
}
