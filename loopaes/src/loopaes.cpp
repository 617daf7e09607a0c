// loop-AES key files and the mapping cryptsetup builds from them.
#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/loopaes/loopaes.hpp>
#include <blkcrypt/shash.hpp>

#include <algorithm>

namespace blkcrypt::loopaes {
namespace {

constexpr const char* kIncompatible = "Incompatible loop-AES keyfile detected.";

bool separator(uint8_t c) { return c == '\n' || c == '\r' || c == 0; }

// cryptsetup looks for the armour header in the first 100 bytes (at most
// size - 1), stopping at a NUL as strstr does.
bool looks_gpg(ConstBytes data) {
    std::size_t n = std::min<std::size_t>(data.size() - 1, 100);
    const auto* p = reinterpret_cast<const char*>(data.data());
    std::string_view head(p, std::find(p, p + n, '\0') - p);
    return head.find("BEGIN PGP MESSAGE") != std::string_view::npos;
}

uint8_t tweak(std::size_t keys) { return keys == 64 ? 0x55 : keys == 65 ? 0xF4 : 0x00; }

}  // namespace

Result<std::vector<SecureBuffer>> parse_keyfile(ConstBytes data) {
    if (data.empty()) return make_error(Status::Invalid, kIncompatible);
    if (looks_gpg(data))
        return make_error(Status::Invalid,
                          "Detected not yet supported GPG encrypted keyfile: decrypt it first "
                          "(gpg --decrypt KEYFILE) and give the decrypted key file.");
    std::vector<SecureBuffer> keys;
    std::size_t at = 0;
    while (at < data.size() && keys.size() < kMaxKeys) {
        const std::size_t start = at;
        while (at < data.size() && !separator(data[at])) ++at;
        if (at == data.size()) return make_error(Status::Invalid, kIncompatible);  // unterminated key
        keys.emplace_back(data.subspan(start, at - start));
        while (at < data.size() && separator(data[at])) ++at;
    }
    const std::size_t n = keys.size();
    const bool same = std::all_of(keys.begin(), keys.end(),
                                  [&](const SecureBuffer& k) { return !k.empty() && k.size() == keys[0].size(); });
    if (at != data.size() || !same || (n != 1 && n != 64 && n != 65)) return make_error(Status::Invalid, kIncompatible);
    return keys;
}

std::optional<std::string> key_hash(const Params& p) {
    if (p.hash) return *p.hash;
    switch (p.key_size) {
        case 16: return "sha256";
        case 24: return "sha384";
        case 32: return "sha512";
        default: return std::nullopt;
    }
}

Result<SecureBuffer> derive_key(Registry& reg, const Params& p, const std::vector<SecureBuffer>& lines) {
    const std::optional<std::string> name = key_hash(p);
    const std::string shown = name ? *name : "[none]";
    const Error refused = make_error(Status::Invalid, "Key processing error (using hash " + shown + ").");
    if (!name || lines.empty() || p.key_size == 0) return refused;
    Result<Shash> h = Shash::alloc(reg, dm::plain_hash_alg(*name));
    // cryptsetup cuts the digest to the key size, but cannot lengthen it.
    if (!h || h->digestsize() < p.key_size) return refused;
    SecureBuffer key(p.key_size * lines.size()), digest(h->digestsize());
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (Status s = h->digest(lines[i], digest.span()); s != Status::Ok) return refused;
        std::copy_n(digest.data(), p.key_size, key.data() + i * p.key_size);
        key[i * p.key_size] ^= tweak(lines.size());
    }
    return key;
}

Result<Volume> open(Registry& reg, const Params& p, ConstBytes keyfile) {
    auto lines = parse_keyfile(keyfile);
    if (!lines) return lines.error();
    auto key = derive_key(reg, p, *lines);
    if (!key) return key.error();
    const unsigned count = static_cast<unsigned>(lines->size());
    // Both multi-key forms load 64 cipher keys; the kernel takes a key that
    // does not split into 64 parts as 64 keys plus the lmk seed (v3).
    auto t = dm::parse_cipher_spec(count == 1 ? p.cipher + "-cbc-plain64" : p.cipher + ":64-cbc-lmk");
    if (!t) return t.error();
    t->key = std::move(key).value();
    t->offset = p.offset;
    t->iv_offset = p.skip.value_or(p.offset);
    return Volume{count, std::move(t).value()};
}

Result<dm::DmTable> dm_table(const Volume& vol, BackingStore& data, const std::string& device) {
    const uint64_t sectors = data.size() / 512;
    if (vol.table.offset >= sectors) return make_error(Status::Invalid, "Device " + device + " is too small.");
    return dm::DmTable{dm::crypt_line(vol.table, sectors - vol.table.offset, device)};
}

}  // namespace blkcrypt::loopaes
