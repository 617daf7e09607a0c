// See <blkcrypt/luks/container.hpp>. LUKS1 is opened here; LUKS2 goes to its
// own reader (luks2.hpp) from this one front.
#include <blkcrypt/luks/container.hpp>
#include <blkcrypt/luks/luks1.hpp>
#include <blkcrypt/luks/luks2.hpp>

#include <blkcrypt/internal/bytes_util.hpp>

#include <array>
#include <cctype>
#include <cstring>

namespace blkcrypt::luks {

Result<Version> detect(BackingStore& header) {
    static constexpr uint8_t kMagic[6] = {'L', 'U', 'K', 'S', 0xba, 0xbe};
    std::array<uint8_t, 8> head{};
    const std::string who = header.name().empty() ? "" : header.name() + ": ";
    if (header.size() < head.size()) return make_error(Status::Invalid, who + "not a LUKS device");
    if (Status s = header.read(0, head); s != Status::Ok)
        return make_error(s, who + "cannot read the LUKS header");
    if (std::memcmp(head.data(), kMagic, sizeof kMagic) != 0) return make_error(Status::Invalid, who + "not a LUKS device");
    const uint16_t v = get_be16(head.data() + 6);
    if (v == 1) return Version::Luks1;
    if (v == 2) return Version::Luks2;
    return make_error(Status::Invalid, who + "Unsupported LUKS version " + std::to_string(v) + ".");
}

namespace {


// The volume of an unlocked LUKS1 header: its payload as a dm-crypt table.
Result<Volume> luks1_volume(const luks1::Header& h, SecureBuffer key, int keyslot) {
    Result<dm::CryptTable> t = dm::parse_cipher_spec(h.cipher_spec());
    if (!t) return make_error(t.status(), "LUKS cipher " + h.cipher_spec() + ": " + t.error().message);
    Volume vol;
    vol.version = Version::Luks1;
    vol.uuid = h.uuid;
    vol.table = std::move(t).value();
    vol.table.key = std::move(key);
    vol.table.offset = h.payload_offset;
    vol.keyslot = keyslot;
    return vol;
}

}  // namespace

Result<Volume> open(Registry& reg, BackingStore& header, ConstBytes passphrase, OpenOptions opts) {
    Result<Version> v = detect(header);
    if (!v) return v.error();
    if (*v == Version::Luks2) return luks2::open(reg, header, passphrase, opts);
    Result<luks1::Header> h = luks1::read_header(reg, header);
    if (!h) return h.error();
    Result<luks1::Unlocked> u = luks1::open_any(reg, header, *h, passphrase, opts.keyslot);
    if (!u) return u.error();
    return luks1_volume(*h, std::move(u->volume_key), static_cast<int>(u->keyslot));
}

Result<Volume> open_with_volume_key(Registry& reg, BackingStore& header, ConstBytes volume_key,
                                    OpenOptions opts) {
    Result<Version> v = detect(header);
    if (!v) return v.error();
    if (*v == Version::Luks2) {
        Result<luks2::Header> h = luks2::read_header(reg, header);
        if (!h) return h.error();
        if (opts.warnings) opts.warnings->insert(opts.warnings->end(), h->warnings.begin(), h->warnings.end());
        if (!opts.ignore_requirements)
            if (auto r = luks2::check_requirements(h->md); !r) return r.error();
        return luks2::volume_from_key(reg, h->md, volume_key);
    }
    Result<luks1::Header> h = luks1::read_header(reg, header);
    if (!h) return h.error();
    Result<bool> ok = luks1::check_volume_key(reg, *h, volume_key);
    if (!ok) return ok.error();
    if (!*ok) return make_error(Status::NoKey, "Volume key does not match the volume.");
    return luks1_volume(*h, SecureBuffer(volume_key), -1);  // no keyslot was used
}

Result<dm::DmTable> dm_table(const Volume& vol, BackingStore& data, const std::string& device) {
    const uint64_t sectors = data.size() / 512;
    if (sectors <= vol.table.offset)
        return make_error(Status::Invalid, (data.name().empty() ? std::string("the data device") : data.name()) +
                                               " ends before the LUKS payload at sector " +
                                               std::to_string(vol.table.offset));
    uint64_t length = vol.length_sectors ? vol.length_sectors : vol.table.length;
    if (!length) length = sectors - vol.table.offset;  // a dynamic segment: to the end
    if (length > sectors - vol.table.offset)
        return make_error(Status::Invalid, "Device too small for the target length");
    return dm::DmTable{dm::crypt_line(vol.table, length, device)};
}

bool valid_uuid(std::string_view u) noexcept {
    if (u.size() != 36) return false;
    for (std::size_t i = 0; i < u.size(); ++i) {
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (u[i] == '-')) return false;
        if (!dash && !std::isxdigit(static_cast<unsigned char>(u[i]))) return false;
    }
    return true;
}

}  // namespace blkcrypt::luks
