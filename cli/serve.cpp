// The NBD server behind `blkcrypt serve` and `blkcrypt crypt serve`.
#include "serve.hpp"

#include "json.hpp"
#include "registry.hpp"
#include "number_option.hpp"
#include "output_file.hpp"

#include <blkcrypt/nbd/server.hpp>
#include <blkcrypt/nbd/tls.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cli {
namespace {

sigset_t stop_signals() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    return s;
}

// stderr lines from several connection threads, never interleaved.
void log_line(const std::string& line) {
    static std::mutex mu;
    std::lock_guard lk(mu);
    std::fprintf(stderr, "blkcrypt: %s\n", line.c_str());
}

// --json: events as JSON lines on stdout (docs/json.md), flushed one by one
// for scripts that wait on them; whole lines whatever thread emits them.
class Events {
public:
    explicit Events(bool on) : on_(on) {}
    bool on() const noexcept { return on_; }
    // fill(w) writes the fields after "event".
    template <class F>
    void emit(std::string_view event, F&& fill) {
        if (!on_) return;
        std::lock_guard lk(mu_);
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("event");
        w.string(event);
        fill(w);
        w.end_object();
        std::cout.flush();
    }

private:
    bool on_;
    std::mutex mu_;
};

void connection_fields(JsonWriter& w, uint64_t id, const std::string& peer) {
    w.key("connection");
    w.unsigned_number(id);
    w.key("peer");
    w.string(peer);
}

// --tls and its credentials. Credentials without --tls mean require (as
// qemu-nbd's --tls-creds does); --tls on|require without them is an error.
void set_tls(const po::variables_map& vm, blkcrypt::nbd::ServerOptions& so) {
    using blkcrypt::nbd::TlsMode;
    blkcrypt::nbd::TlsOptions to;
    if (vm.count("tls-certs")) to.certs_dir = vm["tls-certs"].as<std::string>();
    if (vm.count("tls-psk")) to.psk_file = vm["tls-psk"].as<std::string>();
    to.verify_peer = vm["tls-verify-peer"].as<bool>();
    const bool creds = !to.certs_dir.empty() || !to.psk_file.empty();
    const std::string mode = vm.count("tls") ? vm["tls"].as<std::string>() : creds ? "require" : "off";
    if (mode == "off") so.tls_mode = TlsMode::Off;
    else if (mode == "on") so.tls_mode = TlsMode::On;
    else if (mode == "require") so.tls_mode = TlsMode::Require;
    else throw UsageError("--tls " + mode + ": not off, on or require");
    if (so.tls_mode == TlsMode::Off) {
        if (creds || to.verify_peer) throw UsageError("--tls-certs, --tls-psk and --tls-verify-peer need --tls on|require");
        return;
    }
    if (!blkcrypt::nbd::tls_built())
        throw UsageError("--tls: this blkcrypt was built without TLS (configure with GnuTLS, -DBLKCRYPT_WITH_TLS=ON)");
    if (!creds) throw UsageError("--tls " + mode + " needs --tls-certs DIR or --tls-psk FILE");
    if (!to.certs_dir.empty() && !to.psk_file.empty()) throw UsageError("--tls-certs and --tls-psk: one or the other");
    if (to.verify_peer && to.certs_dir.empty()) throw UsageError("--tls-verify-peer needs --tls-certs (a CA to verify against)");
    auto c = blkcrypt::nbd::TlsCredentials::load(to);
    if (!c) throw UsageError(c.error().message);
    so.tls = *c;
}

// Every file the command line names that exists (the image, key files,
// headers, TLS credentials, tables), for the pid file to be checked against.
// Words that are not paths (an export name, an address) are left out.
std::vector<NamedPath> named_inputs(const po::variables_map& vm) {
    static const std::vector<std::string> not_paths = {"pid-file", "export-name", "bind", "tls", "action"};
    std::vector<NamedPath> out;
    const auto add = [&](const std::string& role, const std::string& value) {
        struct stat st {};
        if (!value.empty() && value != "-" && ::stat(value.c_str(), &st) == 0) out.push_back({role, value});
    };
    for (const auto& [key, v] : vm) {
        if (std::find(not_paths.begin(), not_paths.end(), key) != not_paths.end()) continue;
        const std::string role = key == "files" || key == "image" ? "IMAGE" : "--" + key;
        std::vector<std::string> values;
        if (v.value().type() == typeid(std::string)) values.push_back(v.as<std::string>());
        else if (v.value().type() == typeid(std::vector<std::string>)) values = v.as<std::vector<std::string>>();
        for (const auto& value : values) {
            add(role, value);
            if (const auto eq = value.find('='); eq != std::string::npos) add(role, value.substr(eq + 1));  // NAME=FILE
        }
    }
    if (vm.count("tls-certs"))
        for (const char* f : {"server-cert.pem", "server-key.pem", "ca-cert.pem"})
            add("--tls-certs", vm["tls-certs"].as<std::string>() + "/" + f);
    return out;
}

// The pid file: an output of its own (a regular file under its own name,
// never an input), removed at exit only while it is still the file written.
class PidFile {
public:
    PidFile(const po::variables_map& vm, const std::string& socket) {
        if (!vm.count("pid-file")) return;
        path_ = vm["pid-file"].as<std::string>();
        if (path_.empty()) throw UsageError("--pid-file: empty file name");
        if (!socket.empty() && same_file(socket, path_))
            throw UsageError("--pid-file and --socket both name '" + path_ + "'; give them different files");
        std::vector<NamedPath> inputs = named_inputs(vm);
        if (!socket.empty()) inputs.push_back({"--socket", socket});
        out_.emplace(path_, OutputOptions{.role = "the pid file", .regular_only = true, .create_mode = 0644,
                                          .inputs = std::move(inputs)});
    }
    PidFile(const PidFile&) = delete;
    PidFile& operator=(const PidFile&) = delete;

    // Once the server listens: the file appears whole, by a rename.
    void write() {
        if (!out_) return;
        const std::string pid = std::to_string(::getpid()) + "\n";
        out_->write(blkcrypt::ConstBytes(reinterpret_cast<const uint8_t*>(pid.data()), pid.size()));
        struct stat st {};
        if (::fstat(out_->fd(), &st) != 0) throw Failure(out_->error_text(errno));
        out_->commit();
        dev_ = st.st_dev;
        ino_ = st.st_ino;
        written_ = true;
    }

    // Another process may have replaced it since: only our own file goes.
    void remove() noexcept {
        if (!written_) return;
        written_ = false;
        struct stat st {};
        if (::lstat(path_.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == dev_ && st.st_ino == ino_)
            ::unlink(path_.c_str());
    }
    ~PidFile() { remove(); }

private:
    std::string path_;
    std::optional<Output> out_;
    bool written_ = false;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
};

}  // namespace

void add_serve_options(po::options_description& opts) {
    opts.add_options()
        ("socket", po::value<std::string>()->value_name("PATH"),
         "serve on the Unix socket PATH, created mode 0600 (default when no --port)")
        ("port", number_value<unsigned>(0, 65535)->value_name("N"), "serve on TCP port N (0: any free port)")
        ("bind", po::value<std::string>()->value_name("ADDR"),
         "TCP address (default: 127.0.0.1); anything but loopback needs --tls require")
        ("tls", po::value<std::string>()->value_name("off|on|require"),
         "off, on (clients may use TLS) or require (they must); default: off, or require with --tls-certs/--tls-psk")
        ("tls-certs", po::value<std::string>()->value_name("DIR"),
         "x509: DIR/server-cert.pem, DIR/server-key.pem (mode 0600) and DIR/ca-cert.pem, as qemu lays them out")
        ("tls-psk", po::value<std::string>()->value_name("FILE"),
         "pre-shared keys: FILE (mode 0600) of username:hexkey lines, as psktool writes them")
        ("tls-verify-peer", po::bool_switch(), "x509: clients must show a certificate signed by DIR/ca-cert.pem")
        ("read-only", po::bool_switch(), "refuse writes (the image is opened read-only)")
        ("export-name", po::value<std::string>()->value_name("NAME"),
         "the export's name; the default export \"\" is always this one (default: empty)")
        ("pid-file", po::value<std::string>()->value_name("FILE"),
         "write the process id to FILE (a regular file, never an input) once the server listens; removed at exit")
        ("handshake-timeout", number_value<unsigned>(1, 3600)->default_value(10)->value_name("SECONDS"),
         "close a connection that has not finished its handshake (TLS included) after SECONDS")
        ("send-timeout", number_value<unsigned>(1, 3600)->default_value(30)->value_name("SECONDS"),
         "close a connection whose client reads none of its replies for SECONDS");
}

std::vector<std::string> serve_option_names() {
    return {"socket", "port", "bind", "read-only", "export-name", "pid-file",
            "tls", "tls-certs", "tls-psk", "tls-verify-peer", "handshake-timeout", "send-timeout"};
}

void block_stop_signals() {
    const sigset_t s = stop_signals();
    ::pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

std::shared_ptr<blkcrypt::dm::BlockDevice> table_device(const blkcrypt::dm::DmTable& table,
                                                        std::shared_ptr<blkcrypt::BackingStore> store,
                                                        const TableDevice& how) {
    return table_device(std::vector<blkcrypt::dm::NamedDmTable>{{"", table}}, std::move(store), how);
}

std::shared_ptr<blkcrypt::dm::BlockDevice> table_device(const std::vector<blkcrypt::dm::NamedDmTable>& stack,
                                                        std::shared_ptr<blkcrypt::BackingStore> store,
                                                        const TableDevice& how) {
    blkcrypt::dm::DmBuildOptions o;
    o.read_only = how.read_only;
    o.threads = how.threads;
    o.description = how.description;
    o.open = [&store](const std::string&, bool) -> blkcrypt::Result<std::shared_ptr<blkcrypt::BackingStore>> {
        return store;
    };
    auto dev = blkcrypt::dm::build_dm_stack(registry(), stack, o);
    if (!dev) {
        const auto s = dev.error().status;
        if (how.usage_faults && s != blkcrypt::Status::IoError && s != blkcrypt::Status::NoMem)
            throw UsageError(dev.error().message);
        throw Failure(how.what_failed + dev.error().message);
    }
    return std::move(dev).value();
}

namespace {

// The server's options from the command line: where it listens, TLS, timeouts.
blkcrypt::nbd::ServerOptions server_options(const po::variables_map& vm) {
    blkcrypt::nbd::ServerOptions so;
    if (vm.count("socket")) {
        so.socket_path = vm["socket"].as<std::string>();
        if (so.socket_path.empty()) throw UsageError("--socket: empty path");
    }
    if (vm.count("port")) so.port = static_cast<uint16_t>(vm["port"].as<unsigned>());
    if (vm.count("bind")) {
        if (!so.port) throw UsageError("--bind needs --port");
        so.bind = vm["bind"].as<std::string>();
    }
    if (so.socket_path.empty() && !so.port) throw UsageError("serve needs --socket PATH or --port N");
    set_tls(vm, so);
    so.handshake_timeout_ms = vm["handshake-timeout"].as<unsigned>() * 1000;
    so.send_timeout_ms = vm["send-timeout"].as<unsigned>() * 1000;
    so.log = log_line;
    return so;
}

// --json: the connection events. `events` outlives every connection thread.
void add_connection_events(Events& events, blkcrypt::nbd::ServerOptions& so) {
    if (!events.on()) return;
    so.on_open = [&events](uint64_t id, const std::string& peer) {
        events.emit("connection_open", [&](JsonWriter& w) { connection_fields(w, id, peer); });
    };
    so.on_close = [&events](uint64_t id, const std::string& peer, const blkcrypt::nbd::ConnectionStats& st) {
        events.emit("connection_close", [&](JsonWriter& w) {
            connection_fields(w, id, peer);
            w.key("export");
            w.string(st.export_name);
            w.key("transmission");
            w.boolean(st.transmission);
            w.key("tls");
            w.boolean(st.tls);
            w.key("structured");
            w.boolean(st.structured);
            const std::pair<const char*, uint64_t> counts[] = {
                {"reads", st.reads},     {"bytes_read", st.bytes_read}, {"writes", st.writes},
                {"bytes_written", st.bytes_written}, {"flushes", st.flushes}, {"other", st.other},
                {"errors", st.errors}};
            for (const auto& [k, v] : counts) {
                w.key(k);
                w.unsigned_number(v);
            }
            w.key("end");
            w.string(st.end);
        });
    };
    so.on_request_error = [&events](uint64_t id, const blkcrypt::nbd::RequestError& e) {
        events.emit("request_error", [&](JsonWriter& w) {
            w.key("connection");
            w.unsigned_number(id);
            w.key("command");
            w.string(blkcrypt::nbd::command_name(e.command));
            w.key("offset");
            w.unsigned_number(e.offset);
            w.key("length");
            w.unsigned_number(e.length);
            w.key("error");
            w.string(blkcrypt::nbd::error_name(e.error));
        });
    };
}

// The "serving ..." log line and the "listening" event.
void announce(const blkcrypt::nbd::ServerOptions& so, const blkcrypt::nbd::Server& srv,
              blkcrypt::nbd::Export& exp, const std::string& what, Events& events) {
    std::string where = so.socket_path;
    // An IPv6 address in brackets, as in a URI: [::1]:10809.
    const std::string host = so.bind.find(':') != std::string::npos ? "[" + so.bind + "]" : so.bind;
    if (so.port) where += (where.empty() ? "" : " and ") + host + ":" + std::to_string(srv.port());
    if (so.tls) where += std::string(so.tls_mode == blkcrypt::nbd::TlsMode::Require ? ", TLS required (" : ", TLS on (") +
                         so.tls->kind() + ")";
    const auto& dev = exp.device();
    log_line("serving " + what + " (" + std::to_string(dev.size()) + " bytes" +
             (dev.read_only() ? ", read-only" : "") + ") on " + where);
    events.emit("listening", [&](JsonWriter& w) {
        w.key("what");
        w.string(what);
        w.key("size");
        w.unsigned_number(dev.size());
        w.key("read_only");
        w.boolean(dev.read_only());
        w.key("export");
        w.string(exp.name());
        if (!so.socket_path.empty()) {
            w.key("socket");
            w.string(so.socket_path);
        }
        if (so.port) {
            w.key("address");
            w.string(so.bind);
            w.key("port");
            w.number(srv.port());
        }
        w.key("tls");
        w.string(so.tls_mode == blkcrypt::nbd::TlsMode::Off ? "off"
                 : so.tls_mode == blkcrypt::nbd::TlsMode::On ? "on" : "require");
        w.key("pid");
        w.number(::getpid());
    });
}

// Runs the server until a stop signal; returns the final flush's status.
blkcrypt::Status run_until_signal(blkcrypt::nbd::Server& server, Events& events) {
    // The only thread that takes the stop signals (they are blocked elsewhere).
    std::atomic<bool> done{false};
    std::thread waiter([&] {
        const sigset_t s = stop_signals();
        const timespec tick{0, 200'000'000};
        while (!done) {
            const int sig = ::sigtimedwait(&s, nullptr, &tick);
            if (sig > 0) {
                const std::string sig_name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
                log_line(sig_name + ": finishing the requests in flight");
                events.emit("shutdown", [&](JsonWriter& w) {
                    w.key("signal");
                    w.string(sig_name);
                });
                server.stop();
                return;
            }
        }
    });
    const blkcrypt::Status st = server.run();
    done = true;
    waiter.join();
    return st;
}

}  // namespace

int serve_table(const po::variables_map& vm, const blkcrypt::dm::DmTable& table,
                std::shared_ptr<blkcrypt::BackingStore> image, TableDevice how) {
    return serve_table(vm, std::vector<blkcrypt::dm::NamedDmTable>{{"", table}}, std::move(image), std::move(how));
}

int serve_table(const po::variables_map& vm, const std::vector<blkcrypt::dm::NamedDmTable>& stack,
                std::shared_ptr<blkcrypt::BackingStore> image, TableDevice how) {
    how.read_only = vm.count("read-only") && vm["read-only"].as<bool>();
    how.threads = vm.count("threads") ? vm["threads"].as<unsigned>() : 0;
    return serve_device(vm, table_device(stack, std::move(image), how));
}

int print_table(const po::variables_map& vm, const blkcrypt::Result<blkcrypt::dm::DmTable>& table) {
    if (!table) throw Failure(table.error().message);
    std::cout << blkcrypt::dm::format_dm_table(table.value(), vm["show-key"].as<bool>());
    return 0;
}

int serve_device(const po::variables_map& vm, std::shared_ptr<blkcrypt::dm::BlockDevice> dev) {
    blkcrypt::nbd::ServerOptions so = server_options(vm);
    // Declared before the server: it outlives every connection thread.
    Events events(vm.count("json") && vm["json"].as<bool>());
    add_connection_events(events, so);
    const std::string name = vm.count("export-name") ? vm["export-name"].as<std::string>() : "";
    if (name.size() > 4096) throw UsageError("--export-name is longer than 4096 bytes");
    const std::string what = dev->describe();
    auto exp = std::make_shared<blkcrypt::nbd::Export>(name, std::move(dev));
    PidFile pid_file(vm, so.socket_path);  // checked before the socket exists
    auto srv = blkcrypt::nbd::Server::listen(exp, so);
    if (!srv) {
        if (srv.error().status == blkcrypt::Status::Invalid) throw UsageError(srv.error().message);
        throw Failure(srv.error().message);
    }
    announce(so, **srv, *exp, what, events);
    // Last: a script that waits for the pid file then finds the listening
    // line (and its port) in the log already.
    pid_file.write();
    const blkcrypt::Status st = run_until_signal(**srv, events);
    srv->reset();
    pid_file.remove();
    events.emit("stopped", [&](JsonWriter& w) {
        w.key("flushed");
        w.boolean(st == blkcrypt::Status::Ok);
    });
    if (st != blkcrypt::Status::Ok) throw Failure("flushing " + what + ": " + blkcrypt::to_string(st));
    log_line("stopped; everything written is flushed");
    return 0;
}

}  // namespace cli
