// See <blkcrypt/luks/container.hpp>: luksFormat and the KDF options of a new
// keyslot, for either version. The CLI parses options once into
// FormatOptions / KdfRequest; the version's checks and layout are here.
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/luks/luks2.hpp>
#include <blkcrypt/luks/pbkdf_bench.hpp>
#include <blkcrypt/random.hpp>

#include <algorithm>

#include <unistd.h>

namespace blkcrypt::luks {
namespace {

bool is_power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

// The status a version's refusals carry (container.hpp): LUKS1's parameter
// errors have always been usage errors here, LUKS2's cryptsetup's exit 1.
// I/O errors keep theirs.
Error refusal(Status as, Error e) {
    if (e.status != Status::IoError) e.status = as;
    return e;
}

Result<KeyslotOptions> luks1_kdf(const KdfRequest& r) {
    if (r.memory_kib) return make_error(Status::Invalid, "--pbkdf-memory: not for LUKS1");
    if (r.parallel) return make_error(Status::Invalid, "--pbkdf-parallel: not for LUKS1");
    if (r.pbkdf && *r.pbkdf != "pbkdf2") return make_error(Status::Invalid, "LUKS1 keyslots use --pbkdf pbkdf2 only");
    if (r.iterations && r.iter_time_ms)
        return make_error(Status::Invalid, "--pbkdf-force-iterations and --iter-time exclude each other");
    if (r.iterations && *r.iterations < luks1::kMinIterations)
        return make_error(Status::Unsupported, "Forced iteration count is too low for pbkdf2 (minimum is 1000).");
    KeyslotOptions k;
    k.pbkdf = "pbkdf2";
    if (r.hash) k.hash = *r.hash;
    if (r.iterations) k.iterations = *r.iterations;
    if (r.iter_time_ms) k.iter_time_ms = *r.iter_time_ms;
    return k;
}

Result<KeyslotOptions> luks2_kdf(const KdfRequest& r) {
    const auto refuse = [](std::string m) { return make_error(Status::Unsupported, std::move(m)); };
    KeyslotOptions k;
    if (r.pbkdf) k.pbkdf = *r.pbkdf;
    if (k.pbkdf != "pbkdf2" && k.pbkdf != "argon2i" && k.pbkdf != "argon2id")
        return refuse("Unknown PBKDF type " + k.pbkdf + ".");
    if (r.hash) k.hash = *r.hash;
    if (r.iterations && r.iter_time_ms) return refuse("--pbkdf-force-iterations and --iter-time exclude each other");
    const bool argon = k.pbkdf != "pbkdf2";
    if (r.iterations) {
        k.iterations = *r.iterations;
        // cryptsetup's floors: 1000 PBKDF2 iterations, 4 Argon2 passes.
        const uint32_t floor = argon ? 4 : 1000;
        if (k.iterations < floor)
            return refuse("Forced iteration count is too low for " + k.pbkdf + " (minimum is " +
                          std::to_string(floor) + ").");
    }
    if (r.iter_time_ms) k.iter_time_ms = *r.iter_time_ms;
    if (!argon && (r.memory_kib || r.parallel))
        return refuse("PBKDF max memory or parallel threads must not be set with pbkdf2.");
    if (r.memory_kib) k.memory_kib = *r.memory_kib;
    if (r.parallel) k.parallel = *r.parallel;
    // Forced Argon2 passes take cryptsetup's defaults for what is not given.
    if (argon && k.iterations) {
        if (!k.memory_kib) k.memory_kib = 1024 * 1024;
        if (!k.parallel) {
            const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
            k.parallel = std::min(4u, cpus > 0 ? static_cast<unsigned>(cpus) : 1u);
        }
    }
    return k;
}

// One version's checked parameters and the layout they give.
struct Prepared {
    FormatLayout layout;
    luks1::FormatParams v1;
    luks2::FormatOptions v2;
};

Result<void> prepare_luks1(Registry& reg, const FormatOptions& o, const KeyslotOptions& k, Prepared& p) {
    if (o.sector_size || !o.label.empty() || !o.subsystem.empty() || o.metadata_size || o.keyslots_size)
        return make_error(Status::Invalid, "LUKS1 has no sector size, label, subsystem or metadata sizes");
    if (p.layout.key_size > luks1::kMaxKeyBytes)
        return make_error(Status::Invalid, "--key-size: LUKS1 volume keys are at most 512 bits here");
    luks1::FormatParams& f = p.v1;
    f.cipher = o.cipher;
    f.key_bytes = p.layout.key_size;
    f.hash = k.hash;
    f.iter_time_ms = k.iter_time_ms;
    f.force_iterations = k.iterations;
    const int slot = std::max(o.keyslot, 0);
    if (slot >= static_cast<int>(luks1::kNumKeyslots))
        return make_error(Status::Unsupported, "Key slot " + std::to_string(slot) + " is invalid.");
    f.keyslot = static_cast<unsigned>(slot);
    if (o.offset) {
        if (*o.offset > 0xffffffffu) return make_error(Status::Invalid, "LUKS1 payload offset past 2^32 sectors");
        f.offset = static_cast<uint32_t>(*o.offset);
    }
    if (o.align) {
        if (*o.align > 0xffffffffu) return make_error(Status::Invalid, "LUKS1 payload alignment past 2^32 sectors");
        f.alignment = static_cast<uint32_t>(*o.align);
    } else if (o.detached) {
        f.alignment = 0;
    }
    f.detached = o.detached;
    f.uuid = o.uuid;
    // The layout, from a header for a throwaway key at the minimum cost.
    SecureBuffer key(f.key_bytes);
    if (Result<void> r = random_bytes(key.span()); !r) return r.error();
    luks1::FormatParams probe = f;
    probe.force_iterations = luks1::kMinIterations;
    Result<luks1::Header> h = luks1::make_header(reg, probe, key, luks1::kMinIterations);
    if (!h) return refusal(Status::Invalid, h.error());
    p.layout.sector_size = luks1::kSector;
    p.layout.data_offset = uint64_t{h->payload_offset} * luks1::kSector;
    p.layout.file_size = std::max<uint64_t>(luks1::device_sectors(*h) * luks1::kSector,
                                            o.detached ? 0 : p.layout.data_offset);
    return {};
}

Result<void> prepare_luks2(const FormatOptions& o, const KeyslotOptions& k, Prepared& p) {
    const auto refuse = [](std::string m) { return make_error(Status::Unsupported, std::move(m)); };
    luks2::FormatOptions& f = p.v2;
    luks2::copy_keyslot_costs(f, k);
    f.cipher = o.cipher;
    f.key_size = p.layout.key_size;
    if (!o.integrity.empty()) {
        // cryptsetup's --integrity names (crypt_parse_integrity_mode) to the
        // kernel's, which the segment stores.
        std::string t = o.integrity;
        if (t.starts_with("hmac-") || t.starts_with("cmac-")) t = t.substr(0, 4) + "(" + t.substr(5) + ")";
        auto prof = integrity_profile(o.cipher, t);
        if (!prof) return refuse("Integrity " + o.integrity + " is not supported with cipher " + o.cipher + ".");
        f.integrity = t;
        f.key_size += prof->key_size;
        p.layout.key_size = f.key_size;
    }
    if (o.sector_size) {
        f.sector_size = *o.sector_size;
        if (f.sector_size < 512 || f.sector_size > 4096 || !is_power_of_two(f.sector_size))
            return refuse("Unsupported encryption sector size.");
    }
    // cryptsetup's limits: 47 characters for each (48 bytes with the NUL).
    if (o.label.size() > 47) return refuse("Label is too long.");
    if (o.subsystem.size() > 47) return refuse("Subsystem is too long.");
    f.label = o.label;
    f.subsystem = o.subsystem;
    if (o.metadata_size) {
        f.metadata_size = *o.metadata_size;
        if (!is_power_of_two(f.metadata_size) || f.metadata_size < luks2::kMinHdrSize ||
            f.metadata_size > luks2::kMaxHdrSize)
            return refuse("Unsupported LUKS2 metadata size.");
    }
    if (o.keyslots_size) {
        f.keyslots_size = *o.keyslots_size;
        if (f.keyslots_size % 4096 || f.keyslots_size > luks2::kMaxKeyslotsSize)
            return refuse("Unsupported LUKS2 keyslots size.");
    }
    if (o.offset && o.align) return refuse("--offset and --align-payload exclude each other");
    const uint64_t align = o.align.value_or(0) * 512;
    if (o.offset) {
        f.data_offset = *o.offset * 512;
    } else if (align) {
        // As cryptsetup 2.6.1 does it (checked on this host): a detached
        // header puts the data at the alignment itself, its keyslots area
        // up to there; else the default 16 MiB offset is rounded up to the
        // alignment and the keyslots area stays the default one.
        if (o.detached) {
            f.data_offset = align;
        } else {
            if (!f.keyslots_size) f.keyslots_size = (16u << 20) - 2 * f.metadata_size;
            const uint64_t end = std::max<uint64_t>(16u << 20, 2 * f.metadata_size + f.keyslots_size);
            f.data_offset = (end + align - 1) / align * align;
        }
    } else if (o.detached) {
        f.data_offset = 0;
    } else if (f.keyslots_size) {
        // A given keyslots area that reaches past 16 MiB pushes the data on
        // to the next MiB, as cryptsetup aligns it.
        const uint64_t end = 2 * f.metadata_size + f.keyslots_size;
        f.data_offset = std::max<uint64_t>(16u << 20, (end + (1u << 20) - 1) / (1u << 20) * (1u << 20));
    }
    f.keyslot = std::max(o.keyslot, 0);
    if (f.keyslot >= luks2::kMaxKeyslots) return refuse("Key slot " + std::to_string(f.keyslot) + " is invalid.");
    f.uuid = o.uuid;
    if (f.data_offset % f.sector_size)
        return refuse("Data offset is not multiple of " + std::to_string(f.sector_size) + " bytes.");
    // The header device holds both copies and the keyslots area (default:
    // up to the data offset, or 16 MiB detached, at most 128 MiB).
    const uint64_t areas_end = f.keyslots_size ? 2 * f.metadata_size + f.keyslots_size
                                               : std::min<uint64_t>(f.data_offset ? f.data_offset : 16u << 20,
                                                                    2 * f.metadata_size + luks2::kMaxKeyslotsSize);
    p.layout.sector_size = f.sector_size;
    p.layout.data_offset = f.data_offset;
    p.layout.file_size = std::max<uint64_t>(areas_end, o.detached ? 0 : f.data_offset);
    return {};
}

Result<Prepared> prepare(Registry& reg, const FormatOptions& o) {
    Result<KeyslotOptions> k = keyslot_options(o.version, o.kdf);
    if (!k) return k.error();
    const bool v1 = o.version == Version::Luks1;
    // cryptsetup's default key: 256 bits, doubled for XTS's two keys.
    const uint32_t bits = o.key_bits ? *o.key_bits : o.cipher.find("-xts-") != std::string::npos ? 512 : 256;
    if (bits % 8)
        return make_error(v1 ? Status::Invalid : Status::Unsupported, "--key-size must be a multiple of 8 bits");
    Prepared p;
    p.layout.version = o.version;
    p.layout.key_size = bits / 8;
    if (v1 && !o.integrity.empty())
        return make_error(Status::Invalid, "Integrity option can be used only for LUKS2 format.");
    Result<void> r = v1 ? prepare_luks1(reg, o, *k, p) : prepare_luks2(o, *k, p);
    if (!r) return r.error();
    return p;
}

}  // namespace

Result<KeyslotOptions> keyslot_options(Version version, const KdfRequest& req) {
    return version == Version::Luks1 ? luks1_kdf(req) : luks2_kdf(req);
}

Result<FormatLayout> format_layout(Registry& reg, const FormatOptions& opts) {
    Result<Prepared> p = prepare(reg, opts);
    if (!p) return p.error();
    return p->layout;
}

Result<void> format(Registry& reg, BackingStore& header, const FormatOptions& opts, ConstBytes volume_key,
                    ConstBytes passphrase) {
    Result<Prepared> p = prepare(reg, opts);
    if (!p) return p.error();
    if (!volume_key.empty() && volume_key.size() != p->layout.key_size)
        return make_error(Status::Invalid, "the volume key is not of --key-size");
    if (opts.version == Version::Luks1) {
        SecureBuffer vk = volume_key.empty() ? SecureBuffer(p->layout.key_size) : SecureBuffer(volume_key);
        if (volume_key.empty())
            if (Result<void> r = random_bytes(vk.span()); !r) return r.error();
        Result<luks1::Header> h = luks1::format(reg, header, p->v1, vk, passphrase);
        if (!h) return refusal(Status::Invalid, h.error());
        return {};
    }
    Result<luks2::FormatOptions> f = luks2::resolve_format(reg, opts);
    if (!f) return f.error();
    f->volume_key = volume_key;
    Result<Volume> vol = luks2::format(reg, header, passphrase, *f);
    if (!vol) return refusal(Status::Unsupported, vol.error());
    return {};
}

}  // namespace blkcrypt::luks

namespace blkcrypt::luks::luks2 {

Result<FormatOptions> resolve_format(Registry& reg, const luks::FormatOptions& opts) {
    if (opts.version != Version::Luks2) return make_error(Status::Invalid, "not a LUKS2 format");
    Result<Prepared> p = prepare(reg, opts);
    if (!p) return p.error();
    FormatOptions& f = p->v2;
    // The volume key digest: PBKDF2 benchmarked to 125 ms as cryptsetup's
    // LUKS2 digest is, its 1000 minimum when the keyslot costs are forced.
    if (!f.iterations) {
        Result<uint32_t> it = benchmark_pbkdf2(reg, f.hash, f.key_size, 125);
        if (!it) return refusal(Status::Unsupported, it.error());
        f.digest_iterations = *it;
    }
    return std::move(f);
}

}  // namespace blkcrypt::luks::luks2
