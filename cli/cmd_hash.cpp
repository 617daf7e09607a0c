// blkcrypt hash: digests of files, printed like sha256sum. Input is streamed
// in 1 MiB chunks, so files of any size work in constant memory.
#include "commands.hpp"
#include "json.hpp"

#include <blkcrypt/ahash.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cli {
namespace {

// One running digest, over either transform type.
class Digester {
public:
    virtual ~Digester() = default;
    virtual void init() = 0;
    virtual void update(blkcrypt::ConstBytes data) = 0;
    virtual void final(blkcrypt::Bytes out) = 0;
};

void check(blkcrypt::Status s, const std::string& driver) {
    if (s != blkcrypt::Status::Ok) throw Failure(driver + ": " + blkcrypt::to_string(s));
}

// Fails the usage when the handle cannot start a computation (a MAC without --key).
template <class T>
T started(blkcrypt::Result<T> r) {
    if (!r) {
        if (r.status() == blkcrypt::Status::NoKey) throw UsageError(r.error().message + " (--key)");
        throw Failure(r.error().message);
    }
    return std::move(r).value();
}

class ShashDigester final : public Digester {
public:
    explicit ShashDigester(const blkcrypt::Shash& h)
        : driver_(h.info().driver), desc_(started(h.new_desc())) {}
    void init() override { desc_.init(); }
    void update(blkcrypt::ConstBytes data) override { desc_.update(data); }
    void final(blkcrypt::Bytes out) override { check(desc_.final(out), driver_); }

private:
    std::string driver_;
    blkcrypt::ShashDesc desc_;
};

// Each step waits for completion, so an async ahash (cryptd) works the same.
class AhashDigester final : public Digester {
public:
    explicit AhashDigester(const blkcrypt::Ahash& h) : h_(h), req_(started(h.new_request())) {
        req_.flags = blkcrypt::kMayBacklog;
    }
    void init() override { run(&blkcrypt::Ahash::init); }
    void update(blkcrypt::ConstBytes data) override {
        seg_ = {const_cast<uint8_t*>(data.data()), data.size()};  // only read
        req_.src = blkcrypt::SgList(&seg_, 1);
        req_.nbytes = data.size();
        run(&blkcrypt::Ahash::update);
    }
    void final(blkcrypt::Bytes out) override {
        req_.result = out;
        run(&blkcrypt::Ahash::final);
    }

private:
    void run(blkcrypt::Status (blkcrypt::Ahash::*op)(blkcrypt::AhashRequest&) const) {
        if (h_.is_async()) req_.complete = wait_.callback();
        check(wait_.wait((h_.*op)(req_)), h_.info().driver);
    }

    const blkcrypt::Ahash& h_;
    blkcrypt::AhashRequest req_;
    blkcrypt::CryptoWait wait_;
    blkcrypt::SgEntry seg_;
};

// A Shash when the name has one, else an Ahash (e.g. cryptd(sha256)).
struct HashHandle {
    std::optional<blkcrypt::Shash> shash;
    std::optional<blkcrypt::Ahash> ahash;

    const blkcrypt::AlgInfo& info() const { return shash ? shash->info() : ahash->info(); }
    blkcrypt::Status setkey(blkcrypt::ConstBytes key) {
        return shash ? shash->setkey(key) : ahash->setkey(key);
    }
    std::unique_ptr<Digester> digester() const {
        if (shash) return std::make_unique<ShashDigester>(*shash);
        return std::make_unique<AhashDigester>(*ahash);
    }
};

HashHandle open_hash(blkcrypt::Registry& reg, const std::string& name) {
    HashHandle h;
    auto s = blkcrypt::Shash::alloc(reg, name);
    if (s) {
        h.shash.emplace(std::move(s).value());
        return h;
    }
    auto a = blkcrypt::Ahash::alloc(reg, name);
    // The shash error reads better, unless the ahash side failed its self-test.
    if (!a) throw_alloc_error(a.status() == blkcrypt::Status::SelftestFailed ? a.error() : s.error());
    h.ahash.emplace(std::move(a).value());
    return h;
}

// The file name as sha256sum prints it: with \\, \n, \r escaped and the
// line then starting with a backslash.
std::string escaped_line(const std::string& hex, const std::string& file) {
    std::string name;
    for (char c : file) {
        if (c == '\\') name += "\\\\";
        else if (c == '\n') name += "\\n";
        else if (c == '\r') name += "\\r";
        else name += c;
    }
    return (name.size() != file.size() ? "\\" : "") + hex + "  " + name;
}

}  // namespace

int run_hash(Args args) {
    CommandLine cl{"blkcrypt hash --alg NAME [--driver NAME] [--key HEX] [FILE...]",
                   "Print the digest of each FILE (stdin when none, or for '-') as\n"
                   "'<hex>  <file>', like sha256sum."};
    cl.options.add_options()
        ("alg", po::value<std::string>()->required()->value_name("NAME"), "hash or MAC name, e.g. sha256, hmac(sha256)")
        ("key", po::value<std::string>()->value_name("HEX"), "key in hex, for a keyed hash")
        ("json", po::bool_switch(), "print one JSON object per FILE (docs/json.md)");
    cl.hidden.add_options()("file", po::value<std::vector<std::string>>(), "input files");
    cl.positional.add("file", -1);
    add_driver_option(cl.options);
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const auto files = vm->count("file") ? (*vm)["file"].as<std::vector<std::string>>()
                                         : std::vector<std::string>{"-"};

    blkcrypt::Registry& reg = registry();
    HashHandle h = open_hash(reg, name_to_alloc(reg, *vm));
    if (vm->count("key")) {
        const auto key = decode_secret_hex((*vm)["key"].as<std::string>(), "--key");
        const blkcrypt::Status s = h.setkey(key);
        if (s == blkcrypt::Status::Unsupported) throw UsageError(h.info().driver + " takes no key");
        if (s != blkcrypt::Status::Ok) throw UsageError(key_rejected(h.info(), key.size()));
    }
    auto digester = h.digester();

    // Not zeroed: zeroing the 1 MiB touched all its 256 pages, a third of the
    // time of hashing a 4 KiB file; reads only touch the pages they fill.
    constexpr std::size_t kChunk = 1 << 20;
    const auto chunk = std::make_unique_for_overwrite<uint8_t[]>(kChunk);
    std::vector<uint8_t> digest(h.info().digestsize);
    int rc = 0;
    for (const auto& file : files) {
        try {
            InputFile in(file);
            digester->init();
            while (const std::size_t n = in.read({chunk.get(), kChunk})) digester->update({chunk.get(), n});
            digester->final(digest);
        } catch (const Failure& e) {
            // Like sha256sum: report the file, carry on with the others.
            std::cout.flush();
            std::cerr << "blkcrypt: " << e.what() << '\n';
            rc = 1;
            continue;
        }
        if ((*vm)["json"].as<bool>()) {
            JsonWriter w(std::cout);
            w.begin_object();
            w.key("file"), w.string(file);
            w.key("algorithm"), w.string(h.info().name);
            w.key("driver"), w.string(h.info().driver);
            w.key("digest"), w.string(encode_hex(digest));
            w.end_object();
            continue;
        }
        std::cout << escaped_line(encode_hex(digest), file) << '\n';
    }
    return rc;
}

}  // namespace cli
