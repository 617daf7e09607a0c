// A resumed LUKS2 reencryption given another resilience, as cryptsetup
// 2.6.1 allows ("Reencryption may be resumed with different --resilience
// or --hotzone-size unless implicit datashift resilience mode is used",
// cryptsetup-reencrypt(8)): the reencrypt keyslot keeps its area and takes
// the new type, and the verification digest, which covers that keyslot, is
// made again (luks2_reencrypt.c reencrypt_load with new resilience params).
#include "luks2_internal.hpp"

#include <blkcrypt/dm/plain_key.hpp>
#include <blkcrypt/luks/reencrypt.hpp>
#include <blkcrypt/registry.hpp>
#include <blkcrypt/shash.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace blkcrypt::luks::luks2 {

Result<void> reencrypt_set_resilience(Registry& reg, BackingStore& header, ConstBytes passphrase,
                                      const std::string& resilience, const std::string& hash) {
    Metadata md;
    ReencryptState st;
    if (auto r = detail::read_reencryption(reg, header, md, st); !r) return r;
    // A data shift's area is where the moved data is found: cryptsetup
    // keeps it, whatever is asked.
    if (st.area_type.rfind("datashift", 0) == 0) {
        if (resilience == st.area_type) return {};
        return make_error(Status::Invalid, "Device is in reencryption using datashift resilience. Requested "
                                           "--resilience option cannot be applied.");
    }
    if (resilience != "checksum" && resilience != "journal" && resilience != "none")
        return make_error(Status::Invalid, "Requested --resilience option cannot be applied to current reencryption "
                                           "operation.");
    const std::string h = hash.empty() ? "sha256" : hash;
    if (resilience == st.area_type && (resilience != "checksum" || h == st.hash)) return {};
    if (st.crashed) return make_error(Status::Invalid, "Device requires reencryption recovery. Run repair first.");
    if (st.repair_needed) return make_error(Status::Invalid, "Reencryption metadata is invalid; run repair first.");
    const Segment& prev = md.segments.at(st.seg_previous);
    const Segment& fin = md.segments.at(st.seg_final);
    if (resilience == "checksum") {
        if (prev.integrity)
            return make_error(Status::Unsupported,
                              "Resilience checksum cannot protect a device with an integrity profile: use --resilience "
                              "journal.");
        if (!Shash::alloc(reg, dm::plain_hash_alg(h)))
            return make_error(Status::Unsupported, "Hash algorithm " + h + " is not available.");
    }

    // The digest covers the keys: only a passphrase that opens them (and a
    // digest that still verifies) may rewrite it.
    Result<ReencryptKeys> keys = reencrypt_unlock(reg, header, md, st, passphrase);
    if (!keys) return keys.error();
    if ((st.digest_old >= 0 && keys->old_key.empty()) || (st.digest_new >= 0 && keys->new_key.empty()))
        return make_error(Status::NoKey, "the passphrase opens only one of the two volume keys");
    if (auto r = reencrypt_verify(reg, md, st, keys->old_key, keys->new_key); !r) return r;

    Result<nlohmann::ordered_json> rootr = detail::raw_json(md);
    if (!rootr) return rootr.error();
    nlohmann::ordered_json root = std::move(*rootr);
    nlohmann::ordered_json& area = root["keyslots"][std::to_string(st.keyslot)]["area"];
    area.erase("hash");
    area.erase("sector_size");
    area["type"] = resilience;
    if (resilience == "checksum") {
        // The block cryptsetup hashes: the data device's block size (4096
        // for an image file) or a larger sector size.
        area["hash"] = h;
        area["sector_size"] = std::max({4096u, prev.sector_size, fin.sector_size});
    }
    root["digests"].erase(std::to_string(st.digest));
    if (auto r = detail::add_reencrypt_digest(reg, root, md, st.keyslot, 1000, keys->old_key, keys->new_key); !r)
        return r;
    return write_metadata(reg, header, md, root.dump());
}

}  // namespace blkcrypt::luks::luks2
