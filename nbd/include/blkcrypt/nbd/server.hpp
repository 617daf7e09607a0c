// An NBD server (NetworkBlockDevice/nbd doc/proto.md, fixed newstyle) for one
// BlockDevice export.
//
// serve_connection() is the whole protocol for one client over a Transport
// (any byte stream: a socket, or memory in tests and the fuzz harness): the
// option haggling, then the transmission phase, with requests submitted
// asynchronously and replied to out of order. Server adds the sockets: a Unix
// socket and/or TCP, a thread per connection, and a graceful stop.
//
// Memory is bounded per connection: at most limits.max_inflight_bytes of
// request buffers and max_inflight requests; a request longer than the
// advertised maximum (limits.max_request) is answered EINVAL without being
// allocated (a write's payload is read and dropped through a small buffer).
// Requests need not be aligned: partial blocks are read, merged and written
// back under a lock over the blocks they touch, shared by every connection.
#pragma once

#include <blkcrypt/bytes.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/status.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace blkcrypt::nbd {

// A byte stream to one client. read() fills all of out or returns false (end
// of stream or error); write() sends everything or returns false. Writes come
// from several threads but are serialized by the caller.
class Transport {
public:
    virtual ~Transport() = default;
    virtual bool read(Bytes out) = 0;
    virtual bool write(ConstBytes in) = 0;
    // Two pieces sent back to back (a reply header and its data).
    virtual bool write2(ConstBytes a, ConstBytes b) { return write(a) && write(b); }
    // NBD_OPT_STARTTLS, after its ACK: the server side of a TLS handshake,
    // then every read and write goes through TLS. False: no TLS here, or the
    // handshake failed (the connection ends).
    virtual bool start_tls() { return false; }
    // A reply could not be sent: the stream is lost. Makes a read blocked on
    // the client (which may send nothing more) return false, so the
    // connection ends now rather than when the client next writes.
    virtual void abort() {}
};

// off: STARTTLS is refused; on: clients may upgrade; require: nothing but
// STARTTLS (and ABORT) is accepted before the upgrade (NBD_REP_ERR_TLS_REQD).
enum class TlsMode { Off, On, Require };
class TlsCredentials;

struct Limits {
    uint32_t max_request = 4 << 20;            // advertised maximum payload
    std::size_t max_inflight_bytes = 8 << 20;  // request buffers per connection
    unsigned max_inflight = 128;               // requests per connection
};

class RangeLocks;

// What is served, shared by every connection.
class Export {
public:
    Export(std::string name, std::shared_ptr<dm::BlockDevice> dev, Limits limits = {});
    ~Export();
    const std::string& name() const noexcept { return name_; }
    dm::BlockDevice& device() noexcept { return *dev_; }
    const Limits& limits() const noexcept { return limits_; }
    RangeLocks& locks() noexcept { return *locks_; }
    // The transmission flags: only those that are true.
    uint16_t transmission_flags() const;
    // The empty name (the default export) or the export's own.
    bool matches(std::string_view name) const { return name.empty() || name == name_; }

private:
    std::string name_;
    std::shared_ptr<dm::BlockDevice> dev_;
    Limits limits_;
    std::unique_ptr<RangeLocks> locks_;
};

// What happened on one connection, for the log line.
struct ConnectionStats {
    bool transmission = false;  // reached the transmission phase
    bool structured = false;
    bool tls = false;           // the stream went through TLS
    uint64_t reads = 0, writes = 0, flushes = 0, other = 0, errors = 0;
    uint64_t bytes_read = 0, bytes_written = 0;
    std::string export_name;
    std::string end;  // why it ended: "disconnect", "end of stream", "protocol error: ..."
};

// Runs the protocol until the client leaves, the stream ends or breaks, or a
// protocol error; waits for every request in flight before returning. Every
// request's reply has been written (or failed to be) by then.
// A request answered with an error (for logs and --json events).
struct RequestError {
    uint16_t command;  // proto::kCmd*
    uint64_t offset;
    uint32_t length;
    uint32_t error;    // proto::kE*
};
// "read", "write", ... ("command 42" for unknown ones); "EIO", "EINVAL", ...
std::string command_name(uint16_t command);
std::string error_name(uint32_t error);

struct ConnectionOptions {
    TlsMode tls = TlsMode::Off;
    // Called on the connection's reply thread for each error reply.
    std::function<void(const RequestError&)> on_error;
    // Called once the handshake is done and the transmission phase begins.
    std::function<void()> on_transmission;
};

ConnectionStats serve_connection(Export& exp, Transport& t, const ConnectionOptions& opts = {});

struct ServerOptions {
    std::string socket_path;          // Unix socket, created mode 0600 (empty: none)
    std::optional<uint16_t> port;     // TCP (0: any free port)
    std::string bind = "127.0.0.1";   // anything but loopback needs tls_mode Require
    TlsMode tls_mode = TlsMode::Off;
    std::shared_ptr<TlsCredentials> tls;  // set unless tls_mode is Off
    unsigned max_connections = 64;    // more are closed at once
    // A reply that makes no progress for this long (the client stopped
    // reading) ends its connection; a stop waits at most this long for it.
    unsigned send_timeout_ms = 30000;
    // A connection still in the handshake (TLS included) after this long is
    // closed: idle clients cannot hold the max_connections slots.
    unsigned handshake_timeout_ms = 10000;
    // One line per connection when it ends (no trailing newline).
    std::function<void(const std::string&)> log;
    // Events, called on the connections' threads (callees serialize their
    // output): a client connected (id counts from 1; peer "unix" or
    // "ADDR:PORT"), its connection ended, one of its requests failed.
    std::function<void(uint64_t id, const std::string& peer)> on_open;
    std::function<void(uint64_t id, const std::string& peer, const ConnectionStats&)> on_close;
    std::function<void(uint64_t id, const RequestError&)> on_request_error;
};

class Server {
public:
    // Binds and listens; a socket path that exists is refused (a stale
    // socket, which refuses connections, is removed first), an address
    // that is not loopback is refused unless TLS is required.
    static Result<std::unique_ptr<Server>> listen(std::shared_ptr<Export> exp, ServerOptions opts);
    ~Server();
    // Accepts until stop(); then ends every connection's reading, waits for
    // their requests in flight, flushes the device and returns its status.
    Status run();
    // Thread-safe and async-signal-safe (writes to a pipe).
    void stop() noexcept;
    // The TCP port bound (for port 0), 0 without TCP.
    uint16_t port() const noexcept { return port_; }

private:
    Server() = default;
    struct Impl;
    std::unique_ptr<Impl> impl_;
    uint16_t port_ = 0;
};

}  // namespace blkcrypt::nbd
