"""Server settings: one frozen object built once (by the CLI or a test) and passed down."""

from __future__ import annotations

import dataclasses
import ipaddress
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

# The most rows one outbox claim holds: the configured batch, and what a worker's
# claims grow to while they come back full (delivery/outbox.py). A batch's rows, events
# and renderings are in memory at once.
MAX_OUTBOX_BATCH = 1000

DEFAULT_LISTEN_HOST = "127.0.0.1"
DEFAULT_LISTEN_PORT = 8443
# MTProto over WebSocket, for browsers (the web apps cannot open a plain TCP socket).
DEFAULT_WS_LISTEN_HOST = "127.0.0.1"
DEFAULT_WS_LISTEN_PORT = 8444
DEFAULT_DATA_DIR = Path("./telesrv-data")
MAX_OUTBOX_ORDER_WAIT = 1.0  # seconds; see Settings.outbox_order_wait
DEFAULT_SEND_RATE_LIMIT = 30
# Uploads made into photos or documents (decoded, copied into the file store) per user
# per minute: messages.uploadMedia and messages.sendMedia with an upload.
DEFAULT_MEDIA_RATE_LIMIT = 60
# Against phone-number enumeration: importContacts/resolvePhone calls per user per
# minute, and distinct numbers one user may look up per day (an address book fits).
DEFAULT_PHONE_LOOKUP_RATE_LIMIT = 20
DEFAULT_PHONE_LOOKUP_DAILY_LIMIT = 5000
# contacts.search calls per user per minute: an app searches as its user types, and
# the limit keeps one account from walking the whole user directory.
DEFAULT_PEOPLE_SEARCH_RATE_LIMIT = 60
# account.updateProfile + account.updateUsername calls per user per minute: each change
# is pushed to everyone who has the user in their contacts or chat list.
DEFAULT_PROFILE_CHANGE_RATE_LIMIT = 30
# Hash partitions per partitioned table for a new schema. Few: a statement pays for each
# partition it writes (routing, opening it and its indexes), and a group of sends
# spreads its rows over all of them; 4 instead of 16 took about a fifth off the
# database's CPU per message in `telesrv bench e2e`.
DEFAULT_PARTITION_COUNT = 4
# Login codes one phone may be sent per window (auth.sendCode/resendCode): a person
# retrying is served, a script sending codes to someone else's phone is not.
DEFAULT_LOGIN_CODES_PER_PHONE = 5
DEFAULT_LOGIN_CODE_WINDOW = 600.0
# Login codes asked for from one client address per window, whatever the phones
# (auth.sendCode needs no login; each code may be a paid text message).
DEFAULT_LOGIN_CODES_PER_IP = 30
# Login code delivery hooks: seconds one run may take, further runs after a failure,
# and runs at a time.
DEFAULT_LOGIN_CODE_HOOK_TIMEOUT = 10.0
DEFAULT_LOGIN_CODE_HOOK_RETRIES = 2
DEFAULT_LOGIN_CODE_HOOK_CONCURRENCY = 4
MAX_LOGIN_CODE_HOOK_RETRIES = 10
MAX_LOGIN_CODE_HOOK_CONCURRENCY = 64
# Where --login-code-command finds the phone (with its '+') and the code.
LOGIN_PHONE_ENV = "TELESRV_LOGIN_PHONE"
LOGIN_CODE_ENV = "TELESRV_LOGIN_CODE"
# Host names that are loopback whatever they resolve to.
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
DEFAULT_BLOB_GC_GRACE = 3600.0
# The shortest blob GC grace: a blob must outlive the commit of the row it was made for.
MIN_BLOB_GC_GRACE = 60.0
MAX_BLOB_GC_BATCH = 10_000


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(value: str) -> tuple[Network, ...]:
    """Comma-separated addresses or networks (an address is a network of one)."""
    networks: list[Network] = []
    for part in value.split(","):
        if part.strip():
            try:
                network = ipaddress.ip_network(part.strip(), strict=False)
            except ValueError:
                raise ValueError(f"not an address or network: {part.strip()!r}") from None
            if network.prefixlen == 0:
                # Every address: anyone's X-Forwarded-For would be believed.
                raise ValueError(f"{part.strip()!r} is every address, not a proxy's")
            networks.append(network)
    return tuple(networks)


def parse_host_port(value: str) -> tuple[str, int]:
    """Parse `HOST:PORT`, `[IPv6]:PORT`; raise ValueError with a readable message otherwise."""
    text = value.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"expected [IPV6]:PORT, got {value!r}")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ValueError(f"expected HOST:PORT, got {value!r}")
        if ":" in host:
            raise ValueError(f"IPv6 addresses need brackets, e.g. [::1]:8443; got {value!r}")
    if not host:
        raise ValueError(f"missing host in {value!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"port is not a number in {value!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range in {value!r}")
    return host, port


def format_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback_host(host: str) -> bool:
    """Whether listening on ``host`` reaches this machine only: 127.0.0.0/8, ::1 or
    localhost. Any other name counts as reachable from outside."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Settings:
    listen_host: str = DEFAULT_LISTEN_HOST
    # 0 asks the OS for a free port (tests); the gateway reports the real one when ready.
    listen_port: int = DEFAULT_LISTEN_PORT
    data_dir: Path = DEFAULT_DATA_DIR
    # None starts the embedded server under data_dir.
    database_url: str | None = None
    redis_url: str | None = None
    # When set, every login code equals it (development and tests only).
    dev_login_code: str | None = None
    # auth.signIn creates unknown accounts (Telethon cannot call auth.signUp).
    auto_register: bool = False
    # Login codes per phone per login_code_window seconds; None: 5, or no limit with
    # dev_login_code (test scripts sign the same phone in again and again); 0: no limit.
    login_codes_per_phone: int | None = None
    # Login codes per client address per login_code_window seconds; None: 30, or no
    # limit with dev_login_code; 0: no limit.
    login_codes_per_ip: int | None = None
    login_code_window: float = DEFAULT_LOGIN_CODE_WINDOW
    # Delivery hooks for login codes (services/code_delivery.py): a command run without
    # a shell (the phone and code in its environment) and/or a URL that gets a JSON POST.
    login_code_command: str | None = None
    login_code_webhook: str | None = None
    login_code_hook_timeout: float = DEFAULT_LOGIN_CODE_HOOK_TIMEOUT
    login_code_hook_retries: int = DEFAULT_LOGIN_CODE_HOOK_RETRIES
    login_code_hook_concurrency: int = DEFAULT_LOGIN_CODE_HOOK_CONCURRENCY
    # Login codes are written to the log at DEBUG (they are secrets: off by default).
    log_login_codes: bool = False
    # Messages per user per minute; 0 turns the limit off.
    send_rate_limit: int = DEFAULT_SEND_RATE_LIMIT
    # Uploads made into photos or documents per user per minute; 0 turns the limit off.
    media_rate_limit: int = DEFAULT_MEDIA_RATE_LIMIT
    # contacts.importContacts + contacts.resolvePhone calls per user per minute (0: off).
    phone_lookup_rate_limit: int = DEFAULT_PHONE_LOOKUP_RATE_LIMIT
    # Distinct phone numbers a user may look up per day (0: off).
    phone_lookup_daily_limit: int = DEFAULT_PHONE_LOOKUP_DAILY_LIMIT
    # contacts.search calls per user per minute (0: off).
    people_search_rate_limit: int = DEFAULT_PEOPLE_SEARCH_RATE_LIMIT
    # account.updateProfile + account.updateUsername calls per user per minute (0: off).
    profile_change_rate_limit: int = DEFAULT_PROFILE_CHANGE_RATE_LIMIT
    # Login by QR code: seconds a token can be accepted (Telegram: 30), and exports per
    # auth key and of all keys per minute (0: no limit).
    login_token_ttl: float = 30.0
    login_token_rate_limit: int = 20
    login_token_global_rate_limit: int = 30_000

    # What help.getConfig tells clients to connect to; None means the listen address.
    advertise_host: str | None = None
    advertise_port: int | None = None

    # Where browsers connect over WebSocket (ws://HOST:PORT/apiws); None: no listener.
    # 0 asks the OS for a free port, as for listen_port.
    ws_listen_host: str | None = DEFAULT_WS_LISTEN_HOST
    ws_listen_port: int | None = DEFAULT_WS_LISTEN_PORT
    # PEM certificate chain and private key: the WebSocket listener speaks wss://.
    # Strings, not paths, so they travel to --workers processes as JSON unchanged.
    ws_tls_cert: str | None = None
    ws_tls_key: str | None = None
    # Seconds a WebSocket client has to finish its HTTP upgrade (and TLS handshake)
    # once connected; one that dribbles its request out is closed then.
    ws_upgrade_timeout: float = 10.0
    # Reverse proxies in front of the WebSocket listener, comma-separated addresses or
    # networks (10.0.0.0/8): an upgrade from one of them names its client in
    # X-Forwarded-For, and that address is the one counted, budgeted and logged.
    # Empty: the header is ignored, as anyone may send it.
    ws_trusted_proxies: str = ""

    # Where the Prometheus /metrics, /healthz and /readyz endpoint listens; None: off.
    metrics_host: str | None = None
    metrics_port: int | None = None
    # Server processes on the listen port (SO_REUSEPORT), sharing PostgreSQL and Redis.
    workers: int = 1
    # Listen with SO_REUSEPORT (set for every process of a --workers group).
    reuse_port: bool = False
    # Run although another process serves from data_dir (it joins that server) instead
    # of refusing to start; the workers of `--workers N` always do.
    join: bool = False

    # Lone sends written together while one is in flight (store/send_groups.py): at most
    # this many per statement; 1 writes every send alone.
    send_group_size: int = 64

    outbox_workers: int = 2
    outbox_batch_size: int = 100
    # Idle poll period of an outbox worker, seconds (a notify wakes it earlier).
    outbox_poll_interval: float = 0.05
    # Seconds an outbox worker's claim may wait for it (PostgreSQL then ends the claiming
    # transaction and the rows are due again: the pool's idle_in_transaction_session_timeout,
    # so it bounds every transaction's idle waits; never below db_statement_timeout +
    # db_acquire_timeout there), that rows a writer pushes itself stay held before a worker
    # may deliver them, and the longest backoff of a batch that raised.
    outbox_lease_timeout: float = 30.0
    # Seconds a push may wait for a lower pts of the same user still on its way in this
    # process before it goes anyway (well under the half second clients wait for a gap
    # to fill); 0 pushes at once. At most MAX_OUTBOX_ORDER_WAIT: a worker keeps its
    # batch's transaction, connection and row locks open while its pushes wait.
    outbox_order_wait: float = 0.25

    pg_pool_min_size: int = 2
    pg_pool_max_size: int = 10
    # Seconds one database statement may run (the server cancels it, and the client
    # gives up on a server that does not answer) and a request may wait for a pooled
    # connection. A stalled database then costs a request a clean error, not a hang.
    db_statement_timeout: float = 10.0
    db_acquire_timeout: float = 5.0
    # /readyz answers 503 when the data directory's file system (or the embedded
    # PostgreSQL's) has fewer free bytes than this: a full disk fails sends, uploads
    # and the database's own writes, and a balancer should stop sending clients here
    # before that. 0 leaves only the write probe.
    min_free_disk_bytes: int = 64 * 1024 * 1024

    # Connections before login. A frame must arrive complete within frame_timeout
    # seconds of its first byte (a 512 KiB upload part then needs about 17 KB/s); a
    # connection with no complete message for idle_timeout seconds is closed (a trickle
    # of bytes does not count); one without a key after handshake_timeout seconds too.
    frame_timeout: float = 30.0
    idle_timeout: float = 120.0
    handshake_timeout: float = 30.0
    # Bytes of incomplete frames held for all connections together.
    incomplete_frames_budget: int = 64 * 1024 * 1024
    max_connections: int = 10_000
    max_connections_per_ip: int = 256
    # New auth-key exchanges per second (token buckets): all clients, and per address.
    handshakes_per_second: float = 200.0
    handshake_burst: int = 400
    handshakes_per_ip_per_second: float = 5.0
    handshake_burst_per_ip: int = 100
    # How often connection deadlines are checked, seconds.
    housekeeping_interval: float = 1.0

    # Expired temporary keys, and permanent keys created this many seconds ago that no
    # account is logged in to, are deleted every auth_key_cleanup_interval seconds.
    unused_auth_key_ttl: float = 7 * 24 * 3600.0
    auth_key_cleanup_interval: float = 600.0

    # Unfinished uploads: at most this many files and bytes per user at a time; an upload
    # with no new part for upload_idle_ttl seconds is removed (checked every
    # upload_cleanup_interval seconds).
    max_uploads_per_user: int = 64
    max_upload_bytes_per_user: int = 4 * 1024 * 1024 * 1024
    upload_idle_ttl: float = 3600.0
    upload_cleanup_interval: float = 300.0
    # Blobs no photo or document uses are removed once last written blob_gc_grace
    # seconds ago (younger ones may await their row's commit); a pass runs every
    # blob_gc_interval seconds and checks blob_gc_batch keys per database query.
    blob_gc_grace: float = DEFAULT_BLOB_GC_GRACE
    blob_gc_interval: float = 3600.0
    blob_gc_batch: int = 1000

    # Hash partitions per partitioned table. Fixed when the schema is first created:
    # a database remembers its own count and that value wins over this one.
    partition_count: int = DEFAULT_PARTITION_COUNT

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not 0 <= self.listen_port <= 65535:
            problems.append(f"listen port out of range: {self.listen_port}")
        if self.advertise_port is not None and not 1 <= self.advertise_port <= 65535:
            problems.append(f"advertised port out of range: {self.advertise_port}")
        if self.ws_listen_port is not None and not 0 <= self.ws_listen_port <= 65535:
            problems.append(f"websocket port out of range: {self.ws_listen_port}")
        if (self.ws_listen_host is None) != (self.ws_listen_port is None):
            problems.append("ws_listen_host and ws_listen_port go together")
        if (self.ws_tls_cert is None) != (self.ws_tls_key is None):
            problems.append("ws_tls_cert and ws_tls_key go together")
        try:
            parse_networks(self.ws_trusted_proxies)
        except ValueError as exc:
            problems.append(f"ws_trusted_proxies: {exc}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            problems.append(f"metrics port out of range: {self.metrics_port}")
        if (self.metrics_host is None) != (self.metrics_port is None):
            problems.append("metrics_host and metrics_port go together")
        if self.send_rate_limit < 0:
            problems.append("send_rate_limit must be >= 0 (0 turns it off)")
        if self.media_rate_limit < 0:
            problems.append("media_rate_limit must be >= 0 (0 turns it off)")
        if self.phone_lookup_rate_limit < 0 or self.phone_lookup_daily_limit < 0:
            problems.append("phone lookup limits must be >= 0 (0 turns one off)")
        if self.people_search_rate_limit < 0:
            problems.append("people_search_rate_limit must be >= 0 (0 turns it off)")
        if self.profile_change_rate_limit < 0:
            problems.append("profile_change_rate_limit must be >= 0 (0 turns it off)")
        if self.login_token_ttl < 1:
            problems.append("login_token_ttl must be >= 1 second")
        if self.login_token_rate_limit < 0 or self.login_token_global_rate_limit < 0:
            problems.append("login token rate limits must be >= 0 (0 turns one off)")
        if self.dev_login_code is not None and not self.dev_login_code.strip():
            problems.append("dev_login_code must not be empty")
        if self.login_codes_per_phone is not None and self.login_codes_per_phone < 0:
            problems.append("login_codes_per_phone must be >= 0 (0 turns the limit off)")
        if self.login_codes_per_ip is not None and self.login_codes_per_ip < 0:
            problems.append("login_codes_per_ip must be >= 0 (0 turns the limit off)")
        if not self.login_code_window > 0:
            problems.append("login_code_window must be > 0")
        if self.login_code_command is not None:
            try:
                if not shlex.split(self.login_code_command):
                    problems.append("login_code_command must not be empty")
            except ValueError as exc:
                problems.append(f"login_code_command does not parse: {exc}")
        if self.login_code_webhook is not None:
            try:
                url = urlsplit(self.login_code_webhook)
                _ = url.port
                if url.scheme not in ("http", "https") or not url.hostname:
                    problems.append("login_code_webhook must be an http(s) URL with a host")
            except ValueError as exc:
                problems.append(f"login_code_webhook does not parse: {exc}")
        if not self.login_code_hook_timeout > 0:
            problems.append("login_code_hook_timeout must be > 0")
        if not 0 <= self.login_code_hook_retries <= MAX_LOGIN_CODE_HOOK_RETRIES:
            problems.append(
                f"login_code_hook_retries must be between 0 and {MAX_LOGIN_CODE_HOOK_RETRIES}"
            )
        if not 1 <= self.login_code_hook_concurrency <= MAX_LOGIN_CODE_HOOK_CONCURRENCY:
            problems.append(
                "login_code_hook_concurrency must be between 1 and "
                f"{MAX_LOGIN_CODE_HOOK_CONCURRENCY}"
            )
        if self.max_uploads_per_user < 1 or self.max_upload_bytes_per_user < 1:
            problems.append("upload bounds must be >= 1")
        if self.workers < 1:
            problems.append("workers must be >= 1")
        if self.min_free_disk_bytes < 0:
            problems.append("min_free_disk_bytes must be >= 0")
        if self.outbox_workers < 1:
            problems.append("outbox_workers must be >= 1")
        if not 1 <= self.outbox_batch_size <= MAX_OUTBOX_BATCH:
            problems.append(f"outbox_batch_size must be 1..{MAX_OUTBOX_BATCH}")
        if self.send_group_size < 1:
            problems.append("send_group_size must be >= 1 (1 writes every send alone)")
        if self.outbox_poll_interval <= 0:
            problems.append("outbox_poll_interval must be > 0")
        if self.outbox_lease_timeout <= 0:
            problems.append("outbox_lease_timeout must be > 0")
        if not 0 <= self.outbox_order_wait <= MAX_OUTBOX_ORDER_WAIT:
            problems.append(f"outbox_order_wait must be in 0..{MAX_OUTBOX_ORDER_WAIT}")
        if not 1 <= self.pg_pool_min_size <= self.pg_pool_max_size:
            problems.append("need 1 <= pg_pool_min_size <= pg_pool_max_size")
        if self.pg_pool_max_size <= self.outbox_workers:
            # Each worker keeps its claim's connection while it renders with another.
            problems.append("pg_pool_max_size must be greater than outbox_workers")
        for name in (
            "db_statement_timeout",
            "db_acquire_timeout",
            "frame_timeout",
            "idle_timeout",
            "handshake_timeout",
            "ws_upgrade_timeout",
            "handshakes_per_second",
            "handshakes_per_ip_per_second",
            "housekeeping_interval",
            "unused_auth_key_ttl",
            "auth_key_cleanup_interval",
            "upload_idle_ttl",
            "upload_cleanup_interval",
            "blob_gc_interval",
        ):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be > 0")
        for name in (
            "incomplete_frames_budget",
            "max_connections",
            "max_connections_per_ip",
            "handshake_burst",
            "handshake_burst_per_ip",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1")
        if not self.blob_gc_grace >= MIN_BLOB_GC_GRACE:
            problems.append(f"blob_gc_grace must be >= {MIN_BLOB_GC_GRACE:g} seconds")
        if not 1 <= self.blob_gc_batch <= MAX_BLOB_GC_BATCH:
            problems.append(f"blob_gc_batch must be between 1 and {MAX_BLOB_GC_BATCH}")
        if not 1 <= self.partition_count <= 1024:
            problems.append("partition_count must be between 1 and 1024")
        if problems:
            raise ValueError("invalid settings: " + "; ".join(problems))

    @property
    def login_code_limit(self) -> int:
        """Login codes per phone per window in force (0: no limit)."""
        if self.login_codes_per_phone is not None:
            return self.login_codes_per_phone
        return 0 if self.dev_login_code is not None else DEFAULT_LOGIN_CODES_PER_PHONE

    @property
    def login_code_ip_limit(self) -> int:
        """Login codes per client address per window in force (0: no limit)."""
        if self.login_codes_per_ip is not None:
            return self.login_codes_per_ip
        return 0 if self.dev_login_code is not None else DEFAULT_LOGIN_CODES_PER_IP

    @property
    def listens_beyond_loopback(self) -> bool:
        """Whether a listener may be reached from other machines."""
        hosts = [self.listen_host]
        if self.ws_listen_host is not None:
            hosts.append(self.ws_listen_host)
        return not all(is_loopback_host(host) for host in hosts)

    @property
    def listen(self) -> str:
        return format_host_port(self.listen_host, self.listen_port)

    @property
    def ws_listen(self) -> str | None:
        if self.ws_listen_host is None or self.ws_listen_port is None:
            return None
        return format_host_port(self.ws_listen_host, self.ws_listen_port)

    @property
    def advertised_host(self) -> str:
        return self.advertise_host if self.advertise_host is not None else self.listen_host

    @property
    def advertised_port(self) -> int:
        return self.advertise_port if self.advertise_port is not None else self.listen_port

    @property
    def embedded_postgres_dir(self) -> Path:
        return self.data_dir / "pg"

    @property
    def embedded_redis_dir(self) -> Path:
        return self.data_dir / "redis"

    @property
    def files_dir(self) -> Path:
        """The blob store: file contents by SHA-256."""
        return self.data_dir / "files"

    @property
    def uploads_dir(self) -> Path:
        """Parts of unfinished uploads."""
        return self.data_dir / "uploads"

    @property
    def server_key_path(self) -> Path:
        return self.data_dir / "server_key.pem"

    @property
    def server_public_key_path(self) -> Path:
        return self.data_dir / "server_key.pub.pem"

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
