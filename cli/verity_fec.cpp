#include "verity_fec.hpp"

#include "number_option.hpp"

namespace cli {

void add_fec_options(po::options_description& opts) {
    opts.add_options()
        ("fec-device", po::value<std::string>()->value_name("FILE"),
         "Reed-Solomon parity file (may be HASH, or DATA when HASH is DATA)")
        ("fec-roots", number_value<uint32_t>(2, 24)->default_value(2)->value_name("N"),
         "FEC parity bytes per 255-byte codeword (2..24)")
        ("fec-offset", number_value<uint64_t>(0, INT64_MAX)->default_value(0)->value_name("BYTES"),
         "where the parity starts on the FEC device (a multiple of 512)");
}

std::vector<std::string> fec_option_names() { return {"fec-device", "fec-roots", "fec-offset"}; }

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
