// The IV-generation templates, registered as one array.
#include <blkcrypt/internal/template.hpp>

#include <vector>

namespace blkcrypt {

std::shared_ptr<Template> make_plain_template();
std::shared_ptr<Template> make_plain64_template();
std::shared_ptr<Template> make_plain64be_template();
std::shared_ptr<Template> make_null_template();
std::shared_ptr<Template> make_benbi_template();
std::shared_ptr<Template> make_lmk_template();
std::shared_ptr<Template> make_tcw_template();
std::shared_ptr<Template> make_eboiv_template();
std::shared_ptr<Template> make_elephant_template();

void register_iv_templates(Registry& reg) {
    const std::vector<std::shared_ptr<Template>> all = {
        make_plain_template(),  make_plain64_template(), make_plain64be_template(),
        make_null_template(),   make_benbi_template(),   make_lmk_template(),
        make_tcw_template(),    make_eboiv_template(),   make_elephant_template(),
    };
    (void)reg.register_templates(all);
}

}  // namespace blkcrypt
