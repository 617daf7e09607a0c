#include "verity_fec.hpp"

#include "json.hpp"
#include "number_option.hpp"
#include "output_file.hpp"
#include "progress.hpp"

#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <iostream>
#include <optional>

namespace cli {

void add_fec_options(po::options_description& opts) {
    opts.add_options()
        ("fec-device", po::value<std::string>()->value_name("FILE"),
         "Reed-Solomon parity file (may be HASH, or DATA when HASH is DATA)")
        ("fec-roots", number_value<uint32_t>(2, 24)->default_value(2)->value_name("N"),
         "FEC parity bytes per 255-byte codeword (2..24)")
        ("fec-offset", number_value<uint64_t>(0, INT64_MAX)->default_value(0)->value_name("BYTES"),
         "where the parity starts on the FEC device (a multiple of 512)")
        ("repair", po::bool_switch(), "verify: write the blocks FEC corrected back into DATA and HASH")
        ("repair-to", po::value<std::string>()->value_name("FILE"),
         "verify: write a copy of DATA with the blocks FEC corrected (DATA untouched)")
        ("repair-hash-to", po::value<std::string>()->value_name("FILE"),
         "verify: write a copy of HASH with the hash blocks FEC corrected (HASH untouched)");
}

std::vector<std::string> repair_option_names() { return {"repair", "repair-to", "repair-hash-to"}; }

std::vector<std::string> fec_option_names() { return {"fec-device", "fec-roots", "fec-offset"}; }

namespace {
namespace vy = blkcrypt::verity;

std::string place(const vy::FecRepair& r) {
    return (r.data ? "data block " : "hash block ") + std::to_string(r.block);
}

// The whole of `in`, then the corrected data and/or hash blocks over it
// (both when HASH is DATA: the hash blocks are then at their offsets in it).
void write_repaired_copy(Output& out, blkcrypt::BackingStore& in, const std::string& in_path,
                         const std::vector<vy::FecRepair>& fixed, bool data, bool hash, const vy::VerityParams& p) {
    const uint64_t size = in.size();
    out.reserve(size);
    std::vector<uint8_t> buf(1u << 20);
    for (uint64_t at = 0; at < size;) {
        const auto n = static_cast<std::size_t>(std::min<uint64_t>(buf.size(), size - at));
        if (in.read(at, blkcrypt::Bytes(buf.data(), n)) != blkcrypt::Status::Ok)
            throw Failure(in_path + ": cannot read " + std::to_string(n) + " bytes at offset " + std::to_string(at));
        out.pwrite(blkcrypt::ConstBytes(buf.data(), n), at);
        at += n;
    }
    for (const auto& r : fixed)
        if (r.data ? data : hash) out.pwrite(r.content, r.block * (r.data ? p.data_block_size : p.hash_block_size));
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
    return open_store(t.fec.device, false, "--fec-device");
}

int run_verify_fec(const po::variables_map& vm, const std::vector<std::string>& files, const FecOptions& fec,
                   const vy::VerityParams& params, const vy::TreeGeometry& geometry, const std::vector<uint8_t>& root,
                   blkcrypt::BackingStore& data, blkcrypt::BackingStore& hash, const vy::TreeOptions& opts,
                   Progress& progress) {
    const std::string& data_path = files[0];
    const std::string& hash_path = files[1];
    const bool on_hash = same_file(fec.device, hash_path);
    const bool in_one = same_file(data_path, hash_path);
    // Repaired copies: opened (and checked against every input) before the work.
    const bool repair = vm["repair"].as<bool>();
    const bool copy_data = vm.count("repair-to") != 0, copy_hash = vm.count("repair-hash-to") != 0;
    if (repair && (copy_data || copy_hash))
        throw UsageError("--repair writes in place; --repair-to and --repair-hash-to write copies: choose one");
    if (in_one && copy_hash)
        throw UsageError("--repair-hash-to: HASH is DATA, whose copy (--repair-to) holds both");
    if (copy_data && copy_hash &&
        resolve_links(vm["repair-to"].as<std::string>()) == resolve_links(vm["repair-hash-to"].as<std::string>()))
        throw UsageError("--repair-to and --repair-hash-to name the same file");
    const std::vector<NamedPath> inputs = {{"DATA", data_path}, {"HASH", hash_path}, {"--fec-device", fec.device}};
    std::optional<Output> data_copy, hash_copy;
    if (copy_data) data_copy.emplace(vm["repair-to"].as<std::string>(), OutputOptions{.role = "--repair-to", .inputs = inputs});
    if (copy_hash)
        hash_copy.emplace(vm["repair-hash-to"].as<std::string>(), OutputOptions{.role = "--repair-hash-to", .inputs = inputs});
    Store fec_store = on_hash ? nullptr : open_store(fec.device, false, "--fec-device");
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
        Store data_w = open_store(data_path, true, "DATA");
        Store hash_w = same_file(data_path, hash_path) ? data_w : open_store(hash_path, true, "HASH");
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
    if (copy_data || copy_hash) {
        // A copy of one file beside the damaged other would not verify: both, or neither.
        const auto count = [&](bool of_data) {
            return std::count_if(fixed.begin(), fixed.end(), [&](const vy::FecRepair& r) { return r.data == of_data; });
        };
        const auto data_fixed = count(true), hash_fixed = count(false);
        if (!in_one && hash_fixed && !copy_hash)
            throw StatusFailure(std::to_string(hash_fixed) +
                                    " hash block(s) were corrected too: give --repair-hash-to FILE as well (nothing written)",
                                2);
        if (data_fixed && !copy_data)
            throw StatusFailure(std::to_string(data_fixed) +
                                    " data block(s) were corrected too: give --repair-to FILE as well (nothing written)",
                                2);
        if (data_copy) write_repaired_copy(*data_copy, data, data_path, fixed, true, in_one, params);
        if (hash_copy) write_repaired_copy(*hash_copy, hash, hash_path, fixed, false, true, params);
        Output::commit_all({data_copy ? &*data_copy : nullptr, hash_copy ? &*hash_copy : nullptr});
        if (data_copy)
            std::cerr << "blkcrypt: wrote " << data_copy->name() << ": a copy of " << data_path << " with "
                      << (in_one ? fixed.size() : static_cast<std::size_t>(data_fixed)) << " corrected block(s)\n";
        if (hash_copy)
            std::cerr << "blkcrypt: wrote " << hash_copy->name() << ": a copy of " << hash_path << " with " << hash_fixed
                      << " corrected block(s)\n";
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
