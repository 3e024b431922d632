#include "onednn_conv.hpp"

#include <dnnl.hpp>

namespace foldcheck::bench {

using namespace dnnl;

struct OneDnnConv::Impl {
  engine eng{engine::kind::cpu, 0};
  stream strm{eng};
  convolution_forward::primitive_desc pd;
  convolution_forward conv;
  memory src, wei, dst;
  ref::ConvGeometry g;
};

OneDnnConv::OneDnnConv(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.g = g;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const memory::dims src_dims{g.N, g.C, g.H, g.W}, dst_dims{g.N, g.O, g.OH(), g.OW()};
  const memory::dims wei_dims = g.groups == 1 ? memory::dims{g.O, g.C, g.KH, g.KW}
                                              : memory::dims{g.groups, g.O / g.groups, g.C / g.groups, g.KH, g.KW};
  const memory::desc src_any(src_dims, dt::f32, tag::any), wei_any(wei_dims, dt::f32, tag::any),
      dst_any(dst_dims, dt::f32, tag::any);
  const convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src_any, wei_any,
                                    dst_any, {g.stride_h, g.stride_w}, {g.pad_top, g.pad_left},
                                    {g.pad_bottom, g.pad_right});
  m.pd = convolution_forward::primitive_desc(d, m.eng);
  m.conv = convolution_forward(m.pd);
  // User data in plain layouts, reordered once into the primitive's.
  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end());
  memory usrc({src_dims, dt::f32, tag::nchw}, m.eng, xf.data());
  memory uwei({wei_dims, dt::f32, g.groups == 1 ? tag::oihw : tag::goihw}, m.eng, wf.data());
  m.src = memory(m.pd.src_desc(), m.eng);
  m.wei = memory(m.pd.weights_desc(), m.eng);
  m.dst = memory(m.pd.dst_desc(), m.eng);
  reorder(usrc, m.src).execute(m.strm, usrc, m.src);
  reorder(uwei, m.wei).execute(m.strm, uwei, m.wei);
  m.strm.wait();
}

OneDnnConv::~OneDnnConv() = default;

void OneDnnConv::run() {
  Impl& m = *impl_;
  m.conv.execute(m.strm, {{DNNL_ARG_SRC, m.src}, {DNNL_ARG_WEIGHTS, m.wei}, {DNNL_ARG_DST, m.dst}});
  m.strm.wait();
}

std::vector<float> OneDnnConv::output() const {
  Impl& m = const_cast<Impl&>(*impl_);
  const ref::ConvGeometry& g = m.g;
  std::vector<float> out(static_cast<std::size_t>(g.output_size()));
  memory udst({{g.N, g.O, g.OH(), g.OW()}, memory::data_type::f32, memory::format_tag::nchw}, m.eng, out.data());
  reorder(m.dst, udst).execute(m.strm, m.dst, udst);
  m.strm.wait();
  return out;
}

}  // namespace foldcheck::bench
