#include "verity_fec.hpp"

#include "json.hpp"
#include "number_option.hpp"
#include "progress.hpp"

#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <iostream>

namespace cli {

void add_fec_options(po::options_description& opts) {
    opts.add_options()
        ("fec-device", po::value<std::string>()->value_name("FILE"),
         "Reed-Solomon parity file (may be HASH, or DATA when HASH is DATA)")
        ("fec-roots", number_value<uint32_t>(2, 24)->default_value(2)->value_name("N"),
         "FEC parity bytes per 255-byte codeword (2..24)")
        ("fec-offset", number_value<uint64_t>(0, INT64_MAX)->default_value(0)->value_name("BYTES"),
         "where the parity starts on the FEC device (a multiple of 512)")
        ("repair", po::bool_switch(), "verify: write the blocks FEC corrected back into DATA and HASH");
}

std::vector<std::string> fec_option_names() { return {"fec-device", "fec-roots", "fec-offset"}; }

namespace {
namespace vy = blkcrypt::verity;

std::string place(const vy::FecRepair& r) {
    return (r.data ? "data block " : "hash block ") + std::to_string(r.block);
}
}  // namespace

vy::FecGeometry fec_geometry_for(const FecOptions& fec, const vy::VerityParams& params,
                                 const vy::TreeGeometry& geometry, const std::string& hash_path, uint64_t hash_size) {
    const bool on_hash = same_file(fec.device, hash_path);
    auto g = vy::fec_geometry(params, geometry, fec.roots,
                              vy::fec_covered_blocks(params, geometry, on_hash ? fec.offset : hash_size), fec.offset);
    if (!g) throw UsageError(g.error().message);
    return *g;
}

void apply_fec_options(const po::variables_map& vm, vy::VerityTable& t, const vy::VerityParams& params,
                       const vy::TreeGeometry& geometry, uint64_t hash_size) {
    const auto fec = fec_from_options(vm);
    if (!fec) return;
    const auto g = fec_geometry_for(*fec, params, geometry, t.hash_dev, hash_size);
    if (fec->offset % params.data_block_size)
        throw UsageError("--fec-offset: the table counts fec_start in blocks of " +
                         std::to_string(params.data_block_size) + " bytes");
    t.fec = {fec->device, fec->offset / params.data_block_size, g.covered, g.roots};
}

Store fec_store_for(const vy::VerityTable& t, const Store& data, const Store& hash) {
    if (t.fec.device.empty()) return nullptr;
    if (same_file(t.fec.device, t.hash_dev)) return hash;
    if (same_file(t.fec.device, t.data_dev)) return data;
    return open_store(t.fec.device, false);
}

int run_verify_fec(const po::variables_map& vm, const std::vector<std::string>& files, const FecOptions& fec,
                   const vy::VerityParams& params, const vy::TreeGeometry& geometry, const std::vector<uint8_t>& root,
                   blkcrypt::BackingStore& data, blkcrypt::BackingStore& hash, const vy::TreeOptions& opts,
                   Progress& progress) {
    const std::string& data_path = files[0];
    const std::string& hash_path = files[1];
    const bool on_hash = same_file(fec.device, hash_path);
    Store fec_store = on_hash ? nullptr : open_store(fec.device, false);
    const auto g = fec_geometry_for(fec, params, geometry, hash_path, hash.size());
    blkcrypt::BackingStore& fec_dev = on_hash ? hash : *fec_store;
    if (fec_dev.size() < g.offset + g.parity_bytes())
        throw Failure(fec.device + ": holds " + std::to_string(fec_dev.size()) + " bytes; the FEC area needs " +
                      std::to_string(g.offset + g.parity_bytes()));
    auto report = vy::verify_tree_fec(registry(), params, root, data, hash, g, fec_dev, opts);
    if (!report) throw Failure(report.error().message);
    progress.finish();
    const bool json = vm["json"].as<bool>();
    if (json) {
        JsonWriter w(std::cout);
        w.begin_object();
        w.key("ok"), w.boolean(report->ok());
        w.key("fec_corrected_bytes"), w.number(static_cast<int64_t>(report->corrected_bytes));
        w.key("corrected"), w.begin_array();
        for (const auto& r : report->repaired) {
            w.begin_object();
            w.key("kind"), w.string(r.data ? "data" : "hash");
            w.key("block"), w.number(static_cast<int64_t>(r.block));
            w.key("bytes"), w.number(static_cast<int64_t>(r.bytes));
            w.end_object();
        }
        w.end_array();
        w.key("corrupted");
        json_corruptions(w, report->corruptions);
        w.end_object();
    }
    const uint64_t max = vm["max-errors"].as<uint64_t>();
    auto shown = [&](std::size_t n) { return max == 0 ? n : static_cast<std::size_t>(std::min<uint64_t>(max, n)); };
    const auto& fixed = report->repaired;
    for (std::size_t i = 0; i < shown(fixed.size()); ++i)
        std::cerr << "blkcrypt: " << place(fixed[i]) << " is corrupted; corrected by FEC (" << fixed[i].bytes
                  << " bytes)\n";
    if (shown(fixed.size()) < fixed.size())
        std::cerr << "blkcrypt: ... and " << fixed.size() - shown(fixed.size()) << " more corrected blocks\n";
    if (!fixed.empty())
        std::cerr << "blkcrypt: Found " << report->corrected_bytes << " repairable errors with FEC device.\n";
    if (vm["repair"].as<bool>() && !fixed.empty()) {
        // In place, like the kernel would have served them; only blocks whose hash now matches.
        Store data_w = open_store(data_path, true);
        Store hash_w = same_file(data_path, hash_path) ? data_w : open_store(hash_path, true);
        for (const auto& r : fixed) {
            auto& store = r.data ? *data_w : *hash_w;
            const uint64_t bs = r.data ? params.data_block_size : params.hash_block_size;
            if (store.write(r.block * bs, r.content) != blkcrypt::Status::Ok)
                throw Failure((r.data ? data_path : hash_path) + ": cannot write the corrected " + place(r));
        }
        if (data_w->flush() != blkcrypt::Status::Ok || hash_w->flush() != blkcrypt::Status::Ok)
            throw Failure("cannot flush the repaired blocks");
        std::cerr << "blkcrypt: wrote " << fixed.size() << " corrected block(s) back\n";
    }
    if (report->ok()) return 0;
    const auto& bad = report->corruptions;
    for (std::size_t i = 0; i < shown(bad.size()); ++i) std::cerr << "blkcrypt: " << describe(bad[i]) << "\n";
    if (shown(bad.size()) < bad.size())
        std::cerr << "blkcrypt: ... and " << bad.size() - shown(bad.size()) << " more corrupted blocks (--max-errors 0 lists all)\n";
    std::cerr << "blkcrypt: Errors cannot be repaired with FEC device.\n";
    const bool blocks = std::any_of(bad.begin(), bad.end(),
                                    [](const vy::Corruption& c) { return c.kind != vy::Corruption::RootHash; });
    throw StatusFailure("verification failed: " + std::to_string(bad.size()) + " corrupted block(s)", blocks ? 2 : 1);
}

std::optional<FecOptions> fec_from_options(const po::variables_map& vm) {
    if (!vm.count("fec-device")) {
        if (!vm["fec-roots"].defaulted() || !vm["fec-offset"].defaulted())
            throw UsageError("--fec-roots and --fec-offset need --fec-device");
        return std::nullopt;
    }
    FecOptions f;
    f.device = vm["fec-device"].as<std::string>();
    f.roots = vm["fec-roots"].as<uint32_t>();
    f.offset = vm["fec-offset"].as<uint64_t>();
    if (f.offset % 512) throw UsageError("--fec-offset must be a multiple of 512");
    return f;
}

}  // namespace cli
