"""Node settings: built-in defaults, then a TOML config file, then WARREN_*
environment variables, then command-line flags (each overriding the last)."""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field, fields

from node.ops import logs


@dataclass
class Config:
    node_name: str = "warren@localhost"
    data_dir: str = "./data"
    listen_host: str = "0.0.0.0"
    # Listener ports; 0 picks a free port (the node records the bound one),
    # and a negative port turns that listener off.
    amqp_port: int = 5672
    http_port: int = 15672  # management HTTP API (node/http/api.py)
    metrics_port: int = 15692  # Prometheus /metrics (node/http/prometheus.py)
    # /metrics per object (queue, vhost labels) instead of aggregated: RabbitMQ's
    # prometheus.return_per_object_metrics, false as there (/metrics/per-object always is)
    prometheus_return_per_object_metrics: bool = False
    # TLS listeners (node/client/tls.py), started only when tls_cert is set
    amqps_port: int = 5671
    https_port: int = 15671  # the management API over TLS
    metrics_tls_port: int = 15691  # Prometheus over TLS
    tls_cert: str = ""  # PEM: the node's certificate (chain), reloaded on SIGHUP and `warren ctl reload_tls`
    tls_key: str = ""  # PEM: its private key
    tls_ca: str = ""  # PEM: the authorities that sign client certificates
    tls_verify: str = "none"  # none | peer (a client certificate is checked if sent) | require (and must be sent)
    ssl_cert_login_from: str = "distinguished_name"  # SASL EXTERNAL's user: the subject's DN, or common_name
    grpc_port: int = 25672  # cluster (Raft) port, gRPC; 0: a free one, kept across restarts (node/cluster/identity.py);
    # -1: no cluster, a single node whose metadata store listens on a loopback port only (no seeds)
    # Worker processes of this node (node/workers/, docs/architecture.md "Workers"): connections spread
    # over them by SO_REUSEPORT, classic queues placed on them; 1: one process, as before; 0 (the
    # default): the cores this process may use (CPU affinity and cgroup quota, node/workers/cores.py)
    workers: int = 0
    default_user: str = "guest"
    default_password: str = "guest"
    anonymous_user: str = "guest"  # SASL ANONYMOUS logs in as this user
    # SASL mechanisms offered, in this order: PLAIN, ANONYMOUS, EXTERNAL. EXTERNAL (the user a
    # verified TLS client certificate names) must be listed, as in RabbitMQ: clients holding a
    # certificate (proton) pick it whenever it is offered, even with a password at hand.
    auth_mechanisms: list[str] = field(default_factory=lambda: ["PLAIN", "ANONYMOUS"])
    loopback_users: list[str] = field(default_factory=lambda: ["guest"])  # as in RabbitMQ
    # OAuth 2 (routing/oauth.py, docs/security.md): a PLAIN password or HTTP Bearer that is a JWT
    # signed by one of these keys is a token; its scopes are its permissions (RabbitMQ's auth_oauth2)
    oauth_enabled: bool = False
    oauth_resource_server_id: str = "rabbitmq"  # the `aud` a token must name, and its scopes' prefix
    oauth_scope_prefix: str = ""  # default: resource_server_id + "."
    oauth_verify_aud: bool = True
    # key id -> a JWK table ({kty = "oct", k = "..."}, RSA or EC public) or a PEM public key file;
    # in WARREN_OAUTH_SIGNING_KEYS and --oauth-signing-keys, a JSON object
    oauth_signing_keys: dict = field(default_factory=dict)
    oauth_jwks_file: str = ""  # a JWKS document (keys by their kid)
    oauth_jwks_url: str = ""  # a JWKS document read when the node starts
    oauth_default_key: str = ""  # the key id for tokens whose header has no kid
    max_frame_size: int = 131072
    channel_max: int = 2047
    session_max: int = 64  # sessions per connection (RabbitMQ 4's session_max_per_connection); caps channel_max
    handle_max: int = 255  # links per session: handles 0 .. handle_max
    max_message_size: int = 16 * 1024 * 1024  # RabbitMQ 4's default
    idle_timeout: float = 60.0
    handshake_timeout: float = 10.0  # seconds from accept to the client's OPEN, SASL included (as RabbitMQ); 0: none
    max_connections: int = 0  # connections on this node, 0 = unlimited (RabbitMQ's connection_max is infinity)
    # bytes a connection may buffer for its client (socket writer, pending frames, transfers held
    # by the client's session window) before its consumers stop being fed; they resume below half
    max_write_buffer: int = 1024 * 1024
    # bytes one connection may make the node take in per event-loop turn, on average: past it the
    # connection is not read for as many turns as it overdrew, so a client streaming large
    # messages cannot take the node's core from the others (node/client/ingest.py); 0: unbounded
    ingest_per_turn: int = 64 * 1024
    session_window: int = 400  # transfer frames a session may have in flight to us
    publisher_credit: int = 256  # link credit granted to publishers
    max_unconfirmed: int = 1024  # per publisher link: no more credit beyond this (a client window of 1000 binds)
    # fraction of the memory available (a cgroup limit, else RAM), or bytes when > 1: node/ops/memory.py
    memory_high_watermark: float = 0.6
    disk_free_limit: int = 50 * 1024 * 1024
    alarm_check_interval: float = 1.0
    # Logins (node/client/login.py): PBKDF2 runs in worker threads, never on the loop
    login_workers: int = 1  # threads hashing passwords (each takes up to one core while busy)
    # count authentication attempts by remote address and user name as well as by protocol
    # (RabbitMQ's track_auth_attempt_source, off as there: the table grows with every name tried)
    track_auth_attempt_source: bool = False
    login_max_pending: int = 1000  # logins in progress at once; more are refused (SASL sys-temp, HTTP 503)
    # how new passwords are hashed: warren_pbkdf2_sha256, or RabbitMQ's rabbit_password_hashing_sha256
    # (or _sha512), which a RabbitMQ importing Warren's definitions can verify (docs/security.md)
    password_hashing_module: str = "warren_pbkdf2_sha256"
    login_cache_size: int = 10_000  # verified (user, hash, password digest) kept, least recently used go
    login_failure_delay: float = 0.1  # seconds before the next login from an address after a failure; 0: off
    login_failure_delay_max: float = 2.0  # the delay doubles per failure up to this
    login_failure_addresses: int = 10_000  # source addresses whose failures are remembered
    # A classic queue keeps at most this many ready messages, and this many
    # payload bytes, in memory; the rest wait in the message store (a
    # negative value: no limit).
    classic_queue_memory_window: int = 2048
    classic_queue_memory_bytes: int = 8 * 1024 * 1024
    # A durable classic queue checkpoints its paged positions at least every this many publishes or
    # reads from its paged tail (more with many runs); a restart after a crash then reads its index
    # for about two of these, not its whole depth (queues/classic/checkpoint.py).
    classic_queue_checkpoint_every: int = 100_000
    # A stream consumer's amqp:sql-filter may be at most this many characters (RabbitMQ 4.2: 4096); its
    # nesting and tree height have fixed bounds too (queues/stream/sql/parser.py)
    stream_sql_filter_max_length: int = 4096
    # glibc malloc, set at start (node/ops/allocator.py): at most this many arenas, and a fixed mmap
    # threshold in bytes, so that freed buffers go back to the OS instead of fragmenting the heap.
    # 0 leaves glibc's default; MALLOC_ARENA_MAX / MALLOC_MMAP_THRESHOLD_ in the environment win.
    malloc_arena_max: int = 2
    malloc_mmap_threshold: int = 1024 * 1024
    # the garbage collector, once the node is up (node/ops/gc_settings.py): start-up's objects frozen and
    # the first generation collected every this many allocations; 0 keeps Python's defaults
    gc_gen0_threshold: int = 10_000
    definitions_file: str = ""  # JSON topology loaded at start (like RabbitMQ's load_definitions)
    # AMQP address format v1 (/queue/:q, /exchange/:x/:key, /topic/:key, /amq/queue/:q), as RabbitMQ 4.0-4.2
    # permit its deprecated feature amqp_address_v1 by default; false refuses v1 addresses (invalid-field).
    permit_amqp_address_v1: bool = True
    product: str = "RabbitMQ"  # what clients that check the server's identity expect
    product_version: str = "4.2.0"
    # Logs (node/ops/logs.py, docs/operations.md "Logs"); RabbitMQ's dotted log.* keys, quoted, are
    # accepted in the TOML file too ("log.file.level" = "debug"). Levels are RabbitMQ's names.
    log_level: str = "info"  # the default level (log.default.level) of the outputs that set none
    log_console: bool = True  # log.console
    log_console_level: str = ""  # log.console.level; "": log_level
    log_console_format: str = "plain"  # log.console.formatter: plain (key=value) or json
    log_console_stdio: str = "stderr"  # log.console.stdio (stdout carries the startup line)
    log_file: str = ""  # log.file: the file output, a relative name in log_dir; "" or false: none
    log_dir: str = ""  # log.dir
    log_file_level: str = ""  # log.file.level, RabbitMQ's =level, !=level, <=level, <level too; "": log_level
    log_file_format: str = "plain"  # log.file.formatter
    log_file_rotation_size: int = 0  # log.file.rotation.size: bytes before the file rotates; 0: never
    log_file_rotation_count: int = 5  # log.file.rotation.count: rotated files kept (0: the file starts over)
    # category -> level (connection, channel, queue, user, ra, upgrade: log.connection.level, ...);
    # a category's level wins over the outputs' for its records. WARREN_LOG_CATEGORIES: a JSON object
    log_categories: dict = field(default_factory=dict)
    # RabbitMQ's `cluster_name`: set as the global parameter cluster_name at every start when given;
    # empty leaves it alone (unset, each node reports its own name, as RabbitMQ's default)
    cluster_name: str = ""
    # Clustering (node/cluster/cluster.py). The node's cluster id is advertise_host:grpc_port,
    # the address its peers dial; it must not change across restarts.
    seeds: list[str] = field(default_factory=list)  # peers' "host:port" (grpc); none: a single-member cluster
    # Peer discovery by DNS (node/cluster/discovery.py, RabbitMQ's DNS backend): "NAME" or "NAME:PORT";
    # a blank node joins the cluster of the nodes NAME resolves to (A/AAAA), or forms it; not with seeds
    seeds_dns: str = ""
    seeds_dns_timeout: float = 60.0  # seconds a blank node keeps resolving and asking before it fails to start
    seeds_dns_retry_interval: float = 1.0  # seconds between its rounds (resolve NAME, ask every node)
    cluster_secret: str = ""  # shared by every member; required with seeds (else generated and kept in data_dir)
    advertise_host: str = ""  # default: listen_host, or this machine's name when listening on all interfaces
    cluster_tls_cert: str = ""  # PEM files for mutual TLS between nodes: all three or none
    cluster_tls_key: str = ""
    cluster_tls_ca: str = ""
    cluster_snapshot_entries: int = 5000  # Raft log entries between metadata snapshots
    cluster_tick_interval: float = 0.02  # seconds between the periodic ticks of the Raft groups
    cluster_command_timeout: float = 5.0  # default seconds a metadata change may wait for a majority
    quorum_snapshot_entries: int = 2000  # Raft log entries between a quorum queue's snapshots
    # A quorum queue's publishers get no new credit while a replica hosting consumers is more than
    # this many messages behind the leader, until it is under half (node/vhosts/quorum_flow.py); 0: off
    quorum_consumer_lag_max: int = 2000
    # A follower asks the log for up to this many messages beyond a consumer's credit and holds them,
    # sent the moment the client grants more (queues/quorum/credit_lease.py); so does the node of a
    # consumer without a replica (node/vhosts/proxy_lease.py); 0: off
    quorum_consumer_lease: int = 1000
    # Delayed messages (x-delayed-message) a node's scheduler holds checked out per exchange, as their due
    # time and id only; those due later wait in the exchange's "later" queue, on disk
    # (node/vhosts/delayed_messages.py): the node's memory for pending delays stays bounded by it
    delayed_message_memory_window: int = 100_000
    # Seconds between passes growing quorum queues below their target group size onto reachable
    # members (x-quorum-target-group-size, policy target-group-size: node/vhosts/quorum_reconcile.py); 0: off
    quorum_reconcile_interval: float = 30.0
    # ms a consumer may hold a message unsettled (RabbitMQ's consumer_timeout, 30 minutes) in queues whose
    # x-consumer-timeout or policy consumer-timeout sets none; past it the message goes back to the queue and
    # the consumer's link is detached (docs/architecture.md); 0: none
    consumer_timeout: int = 1_800_000
    cluster_ready_timeout: float = 300.0  # seconds a starting node waits for a majority before giving up
    # Where a new quorum queue's leader goes unless its x-queue-leader-locator or a policy's
    # queue-leader-locator says: client-local (the declaring node) or balanced (node/cluster/placement.py)
    queue_leader_locator: str = "client-local"
    # A node stopping gracefully hands the groups it leads to other members for up to this long
    shutdown_handover_timeout: float = 5.0
    # Cluster-state snapshots for the audit (node/ops/state_snapshot.py, docs/snapshot-schema.md)
    snapshot_interval: float = 5.0  # seconds between records; 0 turns them off
    snapshot_max_bytes: int = 16 * 1024 * 1024  # per file, then the next file
    snapshot_keep_files: int = 8
    enable_test_faults: bool = False  # test-only HTTP endpoints: partition switch and a KV probe


def coerce(value: str, current: object) -> object:
    """A string from the environment or a flag, typed like the setting's current value."""
    if isinstance(current, bool):
        return value.lower() in ("1", "true", "yes", "on")
    if isinstance(current, int):
        return int(value)
    if isinstance(current, float):
        return float(value)
    if isinstance(current, dict):
        return json.loads(value)
    if isinstance(current, list):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def load(config_file: str | None = None, env: dict | None = None, overrides: dict | None = None) -> Config:
    cfg = Config()
    names = {f.name for f in fields(Config)}
    if config_file:
        with open(config_file, "rb") as f:
            data = tomllib.load(f)
        # RabbitMQ's log.CATEGORY.level keys after the rest: they add to log_categories wherever it is
        for key, value in sorted(data.items(), key=lambda item: item[0].startswith("log.")):
            if key.startswith("log."):  # RabbitMQ's name of a log setting
                logs.apply_rabbit_key(cfg, key, value, config_file)
                continue
            if key == "log" and isinstance(value, dict):
                raise ValueError(f"unknown setting 'log' in {config_file}: quote RabbitMQ's log keys "
                                 f"(\"log.file\" = ...) or use Warren's names (log_file = ...)")  # fmt: skip
            key = key.replace("-", "_")
            if key not in names:
                raise ValueError(f"unknown setting {key!r} in {config_file}")
            setattr(cfg, key, value)
    env = os.environ if env is None else env
    for name in names:
        value = env.get("WARREN_" + name.upper())
        if value is not None:
            setattr(cfg, name, coerce(value, getattr(cfg, name)))
    for key, value in (overrides or {}).items():
        if value is not None:
            setattr(cfg, key, value)
    if isinstance(cfg.consumer_timeout, bool) or not isinstance(cfg.consumer_timeout, int) or cfg.consumer_timeout < 0:
        raise ValueError(f"consumer_timeout must be 0 (none) or a number of milliseconds, got {cfg.consumer_timeout!r}")
    w = cfg.delayed_message_memory_window
    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
        raise ValueError(f"delayed_message_memory_window must be a number of messages >= 1, got {w!r}")
    check_workers(cfg)
    logs.check_settings(cfg)
    return cfg


def check_workers(cfg: Config) -> None:
    n = cfg.workers
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 64:
        raise ValueError(f"workers must be a number of processes from 1 to 64 (0: one per usable core), got {n!r}")
