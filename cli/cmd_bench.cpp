// blkcrypt bench: in-memory throughput of ciphers and hashes through the
// registry, like `cryptsetup benchmark`: each cipher/mode/key size encrypting
// and decrypting REQUEST-byte requests, each hash digesting them, with the
// driver the registry picks (the best that passed its self-test), or the one
// --driver names. One thread.
#include "commands.hpp"
#include "json.hpp"
#include "number_option.hpp"

#include <blkcrypt/shash.hpp>
#include <blkcrypt/skcipher.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

namespace cli {
namespace {

struct CipherCase {
    std::string cipher;  // "aes-xts"
    unsigned key_bits;
    std::string driver = {};  // forced with --driver; empty: the registry's choice
};

// cryptsetup benchmark's list.
const std::vector<CipherCase> kCiphers = {
    {"aes-cbc", 128},     {"serpent-cbc", 128}, {"twofish-cbc", 128}, {"aes-cbc", 256},
    {"serpent-cbc", 256}, {"twofish-cbc", 256}, {"aes-xts", 256},     {"serpent-xts", 256},
    {"twofish-xts", 256}, {"aes-xts", 512},     {"serpent-xts", 512}, {"twofish-xts", 512},
};
const std::vector<std::string> kHashes = {"sha1", "sha256", "sha512", "blake2b-512"};

// "aes-xts" -> "xts(aes)"
std::string api_name(const std::string& cipher) {
    const auto dash = cipher.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 == cipher.size())
        throw UsageError("--cipher: '" + cipher + "' is not of the form CIPHER-MODE (e.g. aes-xts)");
    return cipher.substr(dash + 1) + "(" + cipher.substr(0, dash) + ")";
}

// MiB/s of fn(), called until `seconds` have passed (at least 3 calls).
template <class Fn>
double throughput(double seconds, std::size_t bytes, Fn fn) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    uint64_t calls = 0;
    double elapsed = 0;
    do {
        fn();
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < seconds || calls < 3);
    return static_cast<double>(calls * bytes) / elapsed / (1 << 20);
}

struct CipherResult {
    CipherCase c;
    std::string driver;
    double enc = 0, dec = 0;
};

CipherResult bench_cipher(blkcrypt::Registry& reg, const CipherCase& c, std::size_t size, double secs,
                          std::mt19937& rng) {
    auto tfm = blkcrypt::Skcipher::alloc(reg, c.driver.empty() ? api_name(c.cipher) : c.driver);
    if (!tfm) throw UsageError(c.cipher + ": " + tfm.error().message);
    blkcrypt::SecureBuffer key(c.key_bits / 8);
    for (auto& b : key.span()) b = static_cast<uint8_t>(rng());
    if (tfm->setkey(key.span()) != blkcrypt::Status::Ok)
        throw UsageError(c.cipher + ": a " + std::to_string(c.key_bits) + "-bit key is refused");
    std::vector<uint8_t> buf(size, 0x5a), iv(tfm->ivsize(), 1);
    auto run = [&](bool enc) {
        return throughput(secs, size, [&] {
            const auto s = enc ? tfm->encrypt(buf, buf, iv) : tfm->decrypt(buf, buf, iv);
            if (s != blkcrypt::Status::Ok) throw Failure(c.cipher + ": " + blkcrypt::to_string(s));
        });
    };
    CipherResult r{c, tfm->info().driver};
    r.enc = run(true);
    r.dec = run(false);
    return r;
}

std::pair<std::string, double> bench_hash(blkcrypt::Registry& reg, const std::string& name,
                                          const std::string& driver, std::size_t size, double secs) {
    auto h = blkcrypt::Shash::alloc(reg, driver.empty() ? name : driver);
    if (!h) throw UsageError(name + ": " + h.error().message);
    if (h->info().needs_key) throw UsageError(name + " needs a key; bench takes unkeyed hashes");
    std::vector<uint8_t> buf(size, 0x5a), out(h->digestsize());
    const double mib = throughput(secs, size, [&] {
        if (h->digest(buf, out) != blkcrypt::Status::Ok) throw Failure(name + ": digest failed");
    });
    return {h->info().driver, mib};
}

}  // namespace

int run_bench(Args args) {
    CommandLine cl{"blkcrypt bench [--cipher CIPHER-MODE [--key-size BITS]] [--hash NAME] [--driver NAME]\n"
                   "                [--request BYTES] [--time SECONDS] [--json]",
                   "Measure in-memory encryption, decryption and hashing throughput through the\n"
                   "registry (no storage I/O), like cryptsetup benchmark. Without --cipher or --hash,\n"
                   "runs cryptsetup's cipher list and common hashes."};
    cl.options.add_options()
        ("cipher,c", po::value<std::string>()->value_name("SPEC"), "one cipher, e.g. aes-xts, serpent-cbc")
        ("key-size,s", number_value<unsigned>(8, 8 * 8192)->value_name("BITS"), "its key size (default: 256, 512 for xts)")
        ("hash", po::value<std::string>()->value_name("NAME"), "one hash, e.g. sha256")
        ("driver", po::value<std::string>()->value_name("NAME"),
         "measure this driver of the one --cipher or --hash, e.g. xts-aes-openssl")
        ("request", number_value<std::size_t>(16, 64u << 20)->default_value(65536)->value_name("BYTES"), "bytes per request")
        ("time", number_value<double>(0.001, 60)->default_value(0.5)->value_name("SECONDS"), "time per measurement")
        ("json", po::bool_switch(), "print JSON");
    auto vm = parse_command_line(cl, args);
    if (!vm) return 0;
    const std::size_t size = (*vm)["request"].as<std::size_t>();
    const double secs = (*vm)["time"].as<double>();
    if (size == 0 || size % 16 || size > (64u << 20))
        throw UsageError("--request must be a multiple of 16 bytes, at most 64 MiB");
    if (!(secs > 0) || secs > 60) throw UsageError("--time must be in (0, 60] seconds");

    std::vector<CipherCase> ciphers;
    std::vector<std::string> hashes;
    if (vm->count("cipher")) {
        const auto& c = (*vm)["cipher"].as<std::string>();
        const unsigned dflt = c.find("xts") != std::string::npos ? 512 : 256;
        ciphers.push_back({c, vm->count("key-size") ? (*vm)["key-size"].as<unsigned>() : dflt});
        if (ciphers[0].key_bits == 0 || ciphers[0].key_bits % 8) throw UsageError("--key-size: a multiple of 8 bits");
    } else if (vm->count("key-size")) {
        throw UsageError("--key-size needs --cipher");
    }
    if (vm->count("hash")) hashes.push_back((*vm)["hash"].as<std::string>());
    if (vm->count("driver") && ciphers.size() + hashes.size() != 1)
        throw UsageError("--driver needs exactly one --cipher or --hash");
    if (ciphers.empty() && hashes.empty()) ciphers = kCiphers, hashes = kHashes;

    blkcrypt::Registry& reg = registry();
    std::string driver;
    if (vm->count("driver")) {
        const std::string alg = ciphers.empty() ? hashes[0] : api_name(ciphers[0].cipher);
        driver = checked_driver(reg, alg, (*vm)["driver"].as<std::string>());
        if (!ciphers.empty()) ciphers[0].driver = driver;
    }
    std::mt19937 rng(std::random_device{}());
    const bool json = (*vm)["json"].as<bool>();
    std::vector<CipherResult> cr;
    std::vector<std::pair<std::string, std::pair<std::string, double>>> hr;
    for (const auto& c : ciphers) cr.push_back(bench_cipher(reg, c, size, secs, rng));
    for (const auto& h : hashes) hr.push_back({h, bench_hash(reg, h, driver, size, secs)});

    if (json) {
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("request_bytes"), w.number(static_cast<int64_t>(size));
        w.key("ciphers"), w.begin_array();
        for (const auto& r : cr) {
            w.begin_object();
            w.key("cipher"), w.string(r.c.cipher);
            w.key("key_bits"), w.number(r.c.key_bits);
            w.key("driver"), w.string(r.driver);
            w.key("encrypt_mib_s"), w.number(static_cast<int64_t>(r.enc));
            w.key("decrypt_mib_s"), w.number(static_cast<int64_t>(r.dec));
            w.end_object();
        }
        w.end_array();
        w.key("hashes"), w.begin_array();
        for (const auto& [name, res] : hr) {
            w.begin_object();
            w.key("hash"), w.string(name);
            w.key("driver"), w.string(res.first);
            w.key("mib_s"), w.number(static_cast<int64_t>(res.second));
            w.end_object();
        }
        w.end_array();
        w.end_object();
        return 0;
    }
    std::printf("# Tests are approximate using memory only (no storage IO); %zu-byte requests, one thread.\n", size);
    if (!cr.empty()) {
        std::printf("#     Algorithm |       Key |      Encryption |      Decryption | Driver\n");
        for (const auto& r : cr)
            std::printf("%15s   %6ub   %10.1f MiB/s   %10.1f MiB/s   %s\n", r.c.cipher.c_str(), r.c.key_bits,
                        r.enc, r.dec, r.driver.c_str());
    }
    if (!hr.empty()) {
        std::printf("#          Hash |                                Digest | Driver\n");
        for (const auto& [name, res] : hr)
            std::printf("%15s                       %10.1f MiB/s   %s\n", name.c_str(), res.second, res.first.c_str());
    }
    return 0;
}

}  // namespace cli
