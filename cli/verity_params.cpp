#include "verity_params.hpp"

#include "json.hpp"
#include "verity_fec.hpp"
#include "number_option.hpp"

#include <blkcrypt/verity/block_hasher.hpp>

#include <cstdio>
#include <iostream>

#include <sys/random.h>
#include <unistd.h>

namespace cli {

namespace vy = blkcrypt::verity;

namespace {

void random_bytes(uint8_t* out, std::size_t n) {
    while (n) {
        const ssize_t got = ::getrandom(out, n, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw Failure(errno_message("getrandom"));
        out += got;
        n -= static_cast<std::size_t>(got);
    }
}

std::array<uint8_t, 16> parse_uuid(const std::string& s) {
    std::string hex;
    for (char c : s)
        if (c != '-') hex += c;
    const auto bytes = decode_hex(hex, "--uuid");
    if (bytes.size() != 16 || s.size() != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-')
        throw UsageError("--uuid: '" + s + "' is not of the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
    std::array<uint8_t, 16> u{};
    std::copy(bytes.begin(), bytes.end(), u.begin());
    return u;
}

uint32_t block_size_option(const po::variables_map& vm, const char* name) {
    return vm[name].as<uint32_t>();
}

}  // namespace

void add_verity_options(po::options_description& opts) {
    opts.add_options()
        ("hash", po::value<std::string>()->default_value("sha256")->value_name("NAME"),
         "hash algorithm: any registry name, e.g. sha1, sha512, sha256-openssl")
        ("data-block-size", number_value<uint32_t>(512, 524288)->default_value(4096)->value_name("BYTES"), "data block size")
        ("hash-block-size", number_value<uint32_t>(512, 524288)->default_value(4096)->value_name("BYTES"), "hash block size")
        ("data-blocks", number_value<uint64_t>(1, UINT64_MAX)->value_name("N"), "data blocks to protect (default: the whole data file)")
        ("hash-offset", number_value<uint64_t>(0, INT64_MAX)->default_value(0)->value_name("BYTES"), "where the superblock/tree starts on the hash device")
        ("salt", po::value<std::string>()->value_name("HEX"), "salt in hex, '-' for none (default: 32 random bytes)")
        ("uuid", po::value<std::string>()->value_name("UUID"), "UUID for the superblock (default: random)")
        ("format", number_value<uint32_t>(0, 1)->default_value(1)->value_name("N"), "hash format: 1 normal, 0 Chrome OS")
        ("no-superblock", po::bool_switch(), "no superblock: parameters come from the command line")
        ("root-hash-file", po::value<std::string>()->value_name("FILE"), "write (format) or read (verify) the root hash in hex")
        ("threads", threads_value()->default_value(0)->value_name("N"), "hashing threads, at most 256 (0: one per core)")
        ("async", po::bool_switch(), "hash through ahash requests (for async drivers such as cryptd(sha256))")
        ("json", po::bool_switch(), "print the result as JSON")
        ("max-errors", number_value<uint64_t>(0, UINT64_MAX)->default_value(10)->value_name("N"),
         "verify: name at most N corrupted blocks (0: all)")
        ("ignore-corruption", po::bool_switch(), "read/table: log corrupted blocks, return their data")
        ("restart-on-corruption", po::bool_switch(), "table: the kernel restarts (read here: fails the read)")
        ("panic-on-corruption", po::bool_switch(), "table: the kernel panics (read here: fails the read)")
        ("ignore-zero-blocks", po::bool_switch(), "read/table: blocks whose hash is that of zeros read as zeros")
        ("check-at-most-once", po::bool_switch(), "read/table: verify each data block on its first read only")
        ("table", po::value<std::string>()->value_name("LINE"), "read: a dm-verity table line (devices are file paths)")
        ("out", po::value<std::string>()->value_name("FILE"), "read: write the verified data to FILE ('-': stdout)");
}

vy::VerityParams params_from_options(const po::variables_map& vm, uint64_t data_size, bool generate) {
    vy::VerityParams p;
    p.hash_name = lowercase_hash_name(vm["hash"].as<std::string>());
    p.hash_type = vm["format"].as<uint32_t>();
    p.data_block_size = block_size_option(vm, "data-block-size");
    p.hash_block_size = block_size_option(vm, "hash-block-size");
    p.hash_offset = vm["hash-offset"].as<uint64_t>();
    p.superblock = !vm["no-superblock"].as<bool>();
    if (auto ok = vy::check_params({.data_block_size = p.data_block_size,
                                    .hash_block_size = p.hash_block_size,
                                    .data_blocks = 1,
                                    .hash_offset = p.hash_offset});
        !ok)
        throw UsageError(ok.error().message);
    if (p.hash_type > 1) throw UsageError("--format must be 0 or 1");
    // veritysetup format's warning, word for word (the tree is still written).
    if (generate) {
        const long page = ::sysconf(_SC_PAGESIZE);
        if (page > 0 && p.data_block_size > static_cast<unsigned long>(page))
            std::cerr << "WARNING: Kernel cannot activate device if data block size exceeds page size ("
                      << page << ").\n";
    }
    if (vm.count("data-blocks")) {
        p.data_blocks = vm["data-blocks"].as<uint64_t>();
        if (p.data_blocks == 0) throw UsageError("--data-blocks must be at least 1");
    } else {
        if (data_size % p.data_block_size)
            throw UsageError("the data size " + std::to_string(data_size) +
                             " is not a multiple of the data block size " +
                             std::to_string(p.data_block_size) + " (give --data-blocks)");
        p.data_blocks = data_size / p.data_block_size;
        if (p.data_blocks == 0) throw UsageError("the data file is empty");
    }
    if (vm.count("salt")) {
        const auto& s = vm["salt"].as<std::string>();
        if (s != "-") p.salt = decode_hex(s, "--salt");
        if (p.salt.size() > 256) throw UsageError("--salt: at most 256 bytes");
    } else if (generate) {
        p.salt.resize(32);
        random_bytes(p.salt.data(), p.salt.size());
    }
    if (vm.count("uuid")) {
        p.uuid = parse_uuid(vm["uuid"].as<std::string>());
    } else if (generate) {
        random_bytes(p.uuid.data(), p.uuid.size());
        p.uuid[6] = static_cast<uint8_t>((p.uuid[6] & 0x0f) | 0x40);  // version 4
        p.uuid[8] = static_cast<uint8_t>((p.uuid[8] & 0x3f) | 0x80);  // RFC 4122 variant
    }
    return p;
}

namespace {

[[noreturn]] void contradicts(const char* option, const std::string& given, const std::string& recorded) {
    throw UsageError(std::string("--") + option + " " + given + " contradicts the superblock, which records " +
                     recorded);
}

}  // namespace

void check_superblock_options(const po::variables_map& vm, const vy::VerityParams& sb, blkcrypt::Registry& reg) {
    if (given(vm, "hash")) {
        // A driver of the recorded algorithm agrees (sha256-openssl for sha256). The
        // recorded name stays: `table` prints it for the kernel, which knows no such driver.
        const std::string name = lowercase_hash_name(vm["hash"].as<std::string>());
        auto h = vy::BlockHasher::create(reg, name, {}, vy::SaltPlacement::After);
        if (!h) throw UsageError("--hash: " + h.error().message);
        if ((*h)->algorithm() != sb.hash_name) contradicts("hash", name, sb.hash_name);
    }
    const auto same_number = [&](const char* option, uint64_t recorded) {
        if (!given(vm, option)) return;
        const auto& v = vm[option].value();
        const uint64_t n = v.type() == typeid(uint32_t) ? boost::any_cast<uint32_t>(v) : boost::any_cast<uint64_t>(v);
        if (n != recorded) contradicts(option, std::to_string(n), std::to_string(recorded));
    };
    same_number("data-block-size", sb.data_block_size);
    same_number("hash-block-size", sb.hash_block_size);
    same_number("data-blocks", sb.data_blocks);
    same_number("format", sb.hash_type);
    if (given(vm, "salt")) {
        const auto& s = vm["salt"].as<std::string>();
        const auto salt = s == "-" ? std::vector<uint8_t>{} : decode_hex(s, "--salt");
        if (salt != sb.salt) contradicts("salt", s, sb.salt.empty() ? "-" : encode_hex(sb.salt));
    }
    if (given(vm, "uuid") && parse_uuid(vm["uuid"].as<std::string>()) != sb.uuid)
        contradicts("uuid", vm["uuid"].as<std::string>(), format_uuid(sb.uuid));
}

std::string format_uuid(const std::array<uint8_t, 16>& u) {
    const std::string h = encode_hex(u);
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
           h.substr(20);
}

void print_verity_summary(const std::string& device, const vy::VerityParams& p,
                          const vy::TreeGeometry& g, const std::string& root_hex, bool json, const FecSummary* fec) {
    const std::string uuid = p.superblock ? format_uuid(p.uuid) : "";
    const std::string salt = p.salt.empty() ? "-" : encode_hex(p.salt);
    if (json) {
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("uuid"), w.string(uuid);
        w.key("hash_type"), w.number(p.hash_type);
        w.key("data_blocks"), w.number(static_cast<int64_t>(p.data_blocks));
        w.key("data_block_size"), w.number(p.data_block_size);
        w.key("hash_blocks"), w.number(static_cast<int64_t>(g.total_hash_blocks()));
        w.key("hash_block_size"), w.number(p.hash_block_size);
        w.key("hash_algorithm"), w.string(p.hash_name);
        if (fec) {
            w.key("fec_roots"), w.number(fec->roots);
            w.key("fec_blocks"), w.number(static_cast<int64_t>(fec->parity_blocks));
        }
        w.key("salt"), w.string(salt);
        if (!root_hex.empty()) w.key("root_hash"), w.string(root_hex);
        w.key("hash_device_size"), w.number(static_cast<int64_t>(g.hash_device_size(p)));
        w.end_object();
        return;
    }
    std::cout << "VERITY header information for " << device << "\n"
              << "UUID:            \t" << uuid << "\n"
              << "Hash type:       \t" << p.hash_type << "\n"
              << "Data blocks:     \t" << p.data_blocks << "\n"
              << "Data block size: \t" << p.data_block_size << "\n"
              << "Hash blocks:     \t" << g.total_hash_blocks() << "\n"
              << "Hash block size: \t" << p.hash_block_size << "\n"
              << "Hash algorithm:  \t" << p.hash_name << "\n";
    if (fec)
        std::cout << "FEC RS roots:   \t" << fec->roots << "\n"
                  << "FEC blocks:     \t" << fec->parity_blocks << "\n";
    std::cout << "Salt:            \t" << salt << "\n";
    if (!root_hex.empty()) std::cout << "Root hash:      \t" << root_hex << "\n";
    // veritysetup prints the size only for a hash area at the device start.
    // Like veritysetup, FEC on the hash device is counted as if it followed the tree.
    const uint64_t fec_on_hash = fec && fec->on_hash_device ? fec->parity_blocks * p.hash_block_size : 0;
    if (p.hash_offset == 0)
        std::cout << "Hash device size: \t" << g.hash_device_size(p) + fec_on_hash << " [bytes]\n";
    if (fec && !fec->on_hash_device && fec->offset == 0)
        std::cout << "FEC device size: \t" << fec->parity_blocks * p.data_block_size << " [bytes]\n";
}

}  // namespace cli
