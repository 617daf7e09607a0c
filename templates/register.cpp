// The list of built-in templates, registered as one array.
#include <blkcrypt/internal/template.hpp>

#include <vector>

namespace blkcrypt {

std::shared_ptr<Template> make_cryptd_template();
std::shared_ptr<Template> make_ecb_template();
std::shared_ptr<Template> make_cbc_template();
std::shared_ptr<Template> make_ctr_template();
std::shared_ptr<Template> make_pcbc_template();
std::shared_ptr<Template> make_lrw_template();
std::shared_ptr<Template> make_xts_template();
std::shared_ptr<Template> make_hmac_template();
std::shared_ptr<Template> make_cmac_template();
std::shared_ptr<Template> make_xcbc_template();
std::shared_ptr<Template> make_essiv_template();
std::shared_ptr<Template> make_gcm_template();
std::shared_ptr<Template> make_ccm_template();
std::shared_ptr<Template> make_rfc4106_template();
std::shared_ptr<Template> make_rfc4309_template();
std::shared_ptr<Template> make_rfc4543_template();
std::shared_ptr<Template> make_authenc_template();
std::shared_ptr<Template> make_rfc7539_template();
std::shared_ptr<Template> make_adiantum_template();

void register_builtin_templates(Registry& reg) {
    const std::vector<std::shared_ptr<Template>> all = {
        make_cryptd_template(),
        make_ecb_template(),
        make_cbc_template(),
        make_ctr_template(),
        make_pcbc_template(),
        make_lrw_template(),
        make_xts_template(),
        make_hmac_template(),
        make_cmac_template(),
        make_xcbc_template(),
        make_essiv_template(),
        make_gcm_template(),
        make_ccm_template(),
        make_rfc4106_template(),
        make_rfc4309_template(),
        make_rfc4543_template(),
        make_authenc_template(),
        make_rfc7539_template(),
        make_adiantum_template(),
    };
    (void)reg.register_templates(all);
}

}  // namespace blkcrypt
