"""PyTorch definitions of the networks the ONNX importer is tested on, transcribed from their
architectures' facts (/work/shared/reference/networks.md: MIC-DKFZ dynamic-network-
architectures' PlainConvUNet as nnU-Net plans it, MONAI's SegResNet and BasicUNet), with the same module names, so that state_dict keys (hence the ONNX
initializers) are the real networks'. Written here, not copied. Test helper.

Left out on purpose: the real classes register each conv twice (`.conv` and `.all_modules.0`)
and keep the encoder inside the decoder (`decoder.encoder.*`); those aliases name no tensor of
their own, and torch.onnx.export writes one initializer per tensor, so they are omitted here.
"""
import torch
import torch.nn as nn


class ConvNormNonlin(nn.Module):
    """Conv3d (padding (k-1)//2) -> InstanceNorm3d(eps 1e-5, affine) -> LeakyReLU(0.01)."""

    def __init__(self, cin, cout, kernel, stride, nonlin=True):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, kernel, stride, padding=(kernel - 1) // 2, bias=True)
        self.norm = nn.InstanceNorm3d(cout, eps=1e-5, affine=True)
        self.nonlin = nn.LeakyReLU(0.01, inplace=True) if nonlin else None

    def forward(self, x):
        x = self.norm(self.conv(x))
        return self.nonlin(x) if self.nonlin is not None else x


class StackedConvBlocks(nn.Module):
    """n ConvNormNonlin; only the first is strided."""

    def __init__(self, n, cin, cout, kernel, stride):
        super().__init__()
        self.convs = nn.Sequential(*[ConvNormNonlin(cin if i == 0 else cout, cout, kernel,
                                                    stride if i == 0 else 1) for i in range(n)])

    def forward(self, x):
        return self.convs(x)


class PlainConvEncoder(nn.Module):
    def __init__(self, cin, features, strides, n_conv):
        super().__init__()
        stages, c = [], cin
        for f, s, n in zip(features, strides, n_conv):
            stages.append(nn.Sequential(StackedConvBlocks(n, c, f, 3, s)))
            c = f
        self.stages = nn.Sequential(*stages)

    def forward(self, x):
        skips = []
        for stage in self.stages:
            x = stage(x)
            skips.append(x)
        return skips


class UNetDecoder(nn.Module):
    """ConvTranspose (kernel = stride) -> cat(up, skip) -> conv blocks; a 1x1x1 head per stage."""

    def __init__(self, features, strides, n_conv_decoder, classes, deep_supervision):
        super().__init__()
        self.deep_supervision = deep_supervision
        n = len(features)
        transp, stages, heads = [], [], []
        for j in range(1, n):
            below, skip = features[n - j], features[n - j - 1]
            s = strides[n - j]
            transp.append(nn.ConvTranspose3d(below, skip, s, s, bias=True))
            stages.append(StackedConvBlocks(n_conv_decoder[j - 1], 2 * skip, skip, 3, 1))
            heads.append(nn.Conv3d(skip, classes, 1, 1, 0, bias=True))
        self.stages = nn.ModuleList(stages)
        self.transpconvs = nn.ModuleList(transp)
        self.seg_layers = nn.ModuleList(heads)

    def forward(self, skips):
        x = skips[-1]
        outputs = []
        for j in range(len(self.stages)):
            x = self.transpconvs[j](x)
            x = torch.cat((x, skips[-(j + 2)]), 1)
            x = self.stages[j](x)
            if self.deep_supervision:
                outputs.append(self.seg_layers[j](x))
            elif j == len(self.stages) - 1:
                outputs.append(self.seg_layers[-1](x))
        outputs = outputs[::-1]  # highest resolution first
        return outputs if self.deep_supervision else outputs[0]


class PlainConvUNet(nn.Module):
    """nnU-Net 3d_fullres: features [32,64,128,256,320,320], kernel 3, strides 1,2,2,2,2,2,
    2 convs per stage in encoder and decoder."""

    def __init__(self, cin=1, classes=3, features=(32, 64, 128, 256, 320, 320),
                 strides=(1, 2, 2, 2, 2, 2), deep_supervision=False):
        super().__init__()
        n = len(features)
        self.encoder = PlainConvEncoder(cin, features, strides, [2] * n)
        self.decoder = UNetDecoder(features, strides, [2] * (n - 1), classes, deep_supervision)

    def forward(self, x):
        return self.decoder(self.encoder(x))


class BasicBlockD(nn.Module):
    """nnU-Net ResEnc's residual block: conv1 (Conv k, stride + IN + LReLU), conv2 (Conv k + IN,
    no activation); skip = identity, or AvgPool(kernel = stride) where strided, then a
    bias-free 1x1x1 Conv + IN where the channels change; LeakyReLU after the sum."""

    def __init__(self, cin, cout, kernel, stride):
        super().__init__()
        self.conv1 = ConvNormNonlin(cin, cout, kernel, stride)
        self.conv2 = ConvNormNonlin(cout, cout, kernel, 1, nonlin=False)
        skip = []
        if stride != 1:
            skip.append(nn.AvgPool3d(stride, stride))
        if cin != cout:
            projection = ConvNormNonlin(cin, cout, 1, 1, nonlin=False)
            projection.conv = nn.Conv3d(cin, cout, 1, 1, 0, bias=False)
            skip.append(projection)
        self.skip = nn.Sequential(*skip) if skip else nn.Identity()
        self.nonlin2 = nn.LeakyReLU(0.01, inplace=True)

    def forward(self, x):
        return self.nonlin2(self.conv2(self.conv1(x)) + self.skip(x))


class StackedResidualBlocks(nn.Module):
    """n BasicBlockD in `.blocks`; only the first is strided."""

    def __init__(self, n, cin, cout, kernel, stride):
        super().__init__()
        self.blocks = nn.Sequential(*[BasicBlockD(cin if i == 0 else cout, cout, kernel,
                                                  stride if i == 0 else 1) for i in range(n)])

    def forward(self, x):
        return self.blocks(x)


class ResidualEncoder(nn.Module):
    """stem (one ConvNormNonlin to features[0]), then one StackedResidualBlocks per stage;
    the skips are the stages' outputs."""

    def __init__(self, cin, features, strides, n_blocks):
        super().__init__()
        self.stem = StackedConvBlocks(1, cin, features[0], 3, 1)
        stages, c = [], features[0]
        for f, s, n in zip(features, strides, n_blocks):
            stages.append(StackedResidualBlocks(n, c, f, 3, s))
            c = f
        self.stages = nn.Sequential(*stages)

    def forward(self, x):
        x = self.stem(x)
        skips = []
        for stage in self.stages:
            x = stage(x)
            skips.append(x)
        return skips


class ResidualEncoderUNet(nn.Module):
    """nnU-Net ResEnc (M/L/XL presets differ only in patch and batch size): blocks per stage a
    prefix of (1, 3, 4, 6, 6, 6), PlainConvUNet's features, kernels and strides, and its
    decoder with one conv per stage."""

    def __init__(self, cin=1, classes=3, features=(32, 64, 128, 256, 320, 320),
                 strides=(1, 2, 2, 2, 2, 2), n_blocks=(1, 3, 4, 6, 6, 6), deep_supervision=False):
        super().__init__()
        n = len(features)
        self.encoder = ResidualEncoder(cin, features, strides, n_blocks)
        self.decoder = UNetDecoder(features, strides, [1] * (n - 1), classes, deep_supervision)

    def forward(self, x):
        return self.decoder(self.encoder(x))


class ResBlock(nn.Module):
    """MONAI SegResNet's pre-activation block: GN -> ReLU -> Conv -> GN -> ReLU -> Conv, + x."""

    def __init__(self, c, groups):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, c, eps=1e-5, affine=True)
        self.norm2 = nn.GroupNorm(groups, c, eps=1e-5, affine=True)
        self.act = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv3d(c, c, 3, 1, 1, bias=False)
        self.conv2 = nn.Conv3d(c, c, 3, 1, 1, bias=False)

    def forward(self, x):
        y = self.conv1(self.act(self.norm1(x)))
        y = self.conv2(self.act(self.norm2(y)))
        return y + x


class SegResNet(nn.Module):
    """MONAI-style SegResNet: convInit, down levels of C = f, 2f, 4f, ... (a stride-2 conv
    first except at level 0, then ResBlocks), up levels (1x1x1 conv to C/2, upsample, + the
    encoder feature, ResBlocks), GN -> ReLU -> 1x1x1 conv head. upsample 'deconv' is a
    ConvTranspose3d(k2, s2, bias); 'nontrainable' is trilinear (ONNX Resize)."""

    def __init__(self, cin=1, classes=2, init_filters=8, blocks_down=(1, 2, 2, 4),
                 blocks_up=(1, 1, 1), groups=8, upsample_mode="nontrainable"):
        super().__init__()
        f = init_filters
        self.convInit = nn.Conv3d(cin, f, 3, 1, 1, bias=False)
        downs = []
        for i, n in enumerate(blocks_down):
            c = f * 2 ** i
            pre = nn.Conv3d(c // 2, c, 3, 2, 1, bias=False) if i > 0 else nn.Identity()
            downs.append(nn.Sequential(pre, *[ResBlock(c, groups) for _ in range(n)]))
        self.down_layers = nn.ModuleList(downs)
        ups, samples = [], []
        n_up = len(blocks_up)
        for i in range(n_up):
            c = f * 2 ** (n_up - i)
            ups.append(nn.Sequential(*[ResBlock(c // 2, groups) for _ in range(blocks_up[i])]))
            up = (nn.ConvTranspose3d(c // 2, c // 2, 2, 2, bias=True) if upsample_mode == "deconv"
                  else nn.Upsample(scale_factor=2, mode="trilinear", align_corners=False))
            samples.append(nn.Sequential(nn.Conv3d(c, c // 2, 1, bias=False), up))
        self.up_layers = nn.ModuleList(ups)
        self.up_samples = nn.ModuleList(samples)
        self.conv_final = nn.Sequential(nn.GroupNorm(groups, f, eps=1e-5, affine=True),
                                        nn.ReLU(inplace=True), nn.Conv3d(f, classes, 1, bias=True))

    def forward(self, x):
        x = self.convInit(x)
        skips = []
        for down in self.down_layers:
            x = down(x)
            skips.append(x)
        skips = skips[:-1][::-1]
        for up, sample, skip in zip(self.up_layers, self.up_samples, skips):
            x = up(sample(x) + skip)
        return self.conv_final(x)


class BasicConv(nn.Sequential):
    """MONAI's Convolution with ADN order "NDA": `conv` (k3, padding 1, bias), then `adn`:
    InstanceNorm3d (affine) as `N`, Dropout as `D`, LeakyReLU(0.1) as `A`."""

    def __init__(self, cin, cout, dropout=0.0):
        super().__init__()
        self.add_module("conv", nn.Conv3d(cin, cout, 3, 1, 1, bias=True))
        adn = nn.Sequential()
        adn.add_module("N", nn.InstanceNorm3d(cout, affine=True))
        adn.add_module("D", nn.Dropout(dropout))
        adn.add_module("A", nn.LeakyReLU(0.1, inplace=True))
        self.add_module("adn", adn)


class TwoConv(nn.Sequential):
    def __init__(self, cin, cout, dropout=0.0):
        super().__init__()
        self.add_module("conv_0", BasicConv(cin, cout, dropout))
        self.add_module("conv_1", BasicConv(cout, cout, dropout))


class Down(nn.Sequential):
    def __init__(self, cin, cout, dropout=0.0):
        super().__init__()
        self.add_module("max_pooling", nn.MaxPool3d(2))
        self.add_module("convs", TwoConv(cin, cout, dropout))


class UpCat(nn.Module):
    """ConvTranspose(k2, s2) to half the channels (all of them with halves=False) as
    `upsample.deconv`; where a spatial size differs from the skip's, replicate-pad the
    upsampled tensor by one at the end of that axis (at sizes divisible by 16 none does, and
    torch.onnx.export still writes the all-zero edge Pad); cat([skip, up]); TwoConv."""

    def __init__(self, cin, ccat, cout, dropout=0.0, halves=True):
        super().__init__()
        cup = cin // 2 if halves else cin
        self.upsample = nn.Sequential()
        self.upsample.add_module("deconv", nn.ConvTranspose3d(cin, cup, 2, 2, bias=True))
        self.convs = TwoConv(ccat + cup, cout, dropout)

    def forward(self, x, skip):
        x = self.upsample(x)
        pads = [0] * 6
        for i in range(3):
            if skip.shape[-i - 1] != x.shape[-i - 1]:
                pads[i * 2 + 1] = 1
        x = torch.nn.functional.pad(x, pads, "replicate")
        return self.convs(torch.cat([skip, x], dim=1))


class BasicUNet(nn.Module):
    """MONAI's BasicUNet (3D): features (f0..f5) = (32, 32, 64, 128, 256, 32) by default;
    TwoConv at the top, four Down (MaxPool(2), TwoConv), four UpCat (the last one keeps its
    channels and gives f5), a 1x1x1 conv (bias) to the classes."""

    def __init__(self, cin=1, classes=2, features=(32, 32, 64, 128, 256, 32), dropout=0.0):
        super().__init__()
        f = features
        self.conv_0 = TwoConv(cin, f[0], dropout)
        self.down_1 = Down(f[0], f[1], dropout)
        self.down_2 = Down(f[1], f[2], dropout)
        self.down_3 = Down(f[2], f[3], dropout)
        self.down_4 = Down(f[3], f[4], dropout)
        self.upcat_4 = UpCat(f[4], f[3], f[3], dropout)
        self.upcat_3 = UpCat(f[3], f[2], f[2], dropout)
        self.upcat_2 = UpCat(f[2], f[1], f[1], dropout)
        self.upcat_1 = UpCat(f[1], f[0], f[5], dropout, halves=False)
        self.final_conv = nn.Conv3d(f[5], classes, 1, bias=True)

    def forward(self, x):
        x0 = self.conv_0(x)
        x1 = self.down_1(x0)
        x2 = self.down_2(x1)
        x3 = self.down_3(x2)
        x4 = self.down_4(x3)
        u = self.upcat_4(x4, x3)
        u = self.upcat_3(u, x2)
        u = self.upcat_2(u, x1)
        u = self.upcat_1(u, x0)
        return self.final_conv(u)


class ConvMaxPool(nn.Module):
    """Conv3d(k3) -> MaxPool3d(2) (BasicUNet's down path) -> Conv3d(1x1x1): the MaxPool
    import's test network."""

    def __init__(self, cin=1, features=4, classes=2):
        super().__init__()
        self.conv = nn.Conv3d(cin, features, 3, 1, 1, bias=True)
        self.pool = nn.MaxPool3d(2)
        self.head = nn.Conv3d(features, classes, 1, 1, 0, bias=True)

    def forward(self, x):
        return self.head(self.pool(self.conv(x)))


class ConvResize(nn.Module):
    """Conv3d(k3) -> interpolate (scale_factor, or size) -> Conv3d(1x1x1): the Resize
    import's test network, for each form torch.onnx.export writes."""

    def __init__(self, mode="trilinear", align_corners=None, scale=None, size=None):
        super().__init__()
        self.conv = nn.Conv3d(1, 3, 3, 1, 1, bias=True)
        self.up = nn.Upsample(size=size, scale_factor=scale, mode=mode, align_corners=align_corners)
        self.head = nn.Conv3d(3, 2, 1, 1, 0, bias=True)

    def forward(self, x):
        return self.head(self.up(self.conv(x)))


class ChannelsLast(nn.Module):
    """Conv3d(k3) -> permute to N x D x H x W x C -> sigmoid times a per-channel scale (it
    broadcasts along the last axis) -> permute back to N x C x D x H x W -> Conv3d(1x1x1):
    the Transpose import's test network."""

    def __init__(self, cin=1, features=3, classes=2):
        super().__init__()
        self.conv = nn.Conv3d(cin, features, 3, 1, 1, bias=True)
        self.scale = nn.Parameter(torch.tensor([0.5, -1.5, 2.0])[:features])
        self.head = nn.Conv3d(features, classes, 1, 1, 0, bias=True)

    def forward(self, x):
        y = self.conv(x).permute(0, 2, 3, 4, 1)
        y = torch.sigmoid(y) * self.scale
        return self.head(y.permute(0, 4, 1, 2, 3))


def kaiming_init(net):
    """nnU-Net's init: Kaiming normal (a=1e-2) for convs and transposed convs, biases 0."""
    for m in net.modules():
        if isinstance(m, (nn.Conv3d, nn.ConvTranspose3d)):
            nn.init.kaiming_normal_(m.weight, a=1e-2)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


NETWORKS = {
    # Few features and stages where the class takes them, to keep CI fast.
    "plainconvunet": lambda: PlainConvUNet(1, 3, (8, 16, 32, 32), (1, 2, 2, 2)),
    "plainconvunet_ds": lambda: PlainConvUNet(1, 3, (8, 16, 32, 32), (1, 2, 2, 2),
                                              deep_supervision=True),
    "plainconvunet_3d_fullres": lambda: PlainConvUNet(),
    # The full-size networks of the GPU checks and benchmarks (scripts/gpu/import.sh,
    # bench/import_torch.py): nnU-Net's 3d_fullres plan with deep supervision (5 heads), and
    # ResidualEncoderUNet as the ResEnc M/L/XL presets build it (the presets differ only in
    # patch and batch size).
    "plainconvunet_3d_fullres_ds": lambda: PlainConvUNet(deep_supervision=True),
    "resencunet_preset_ds": lambda: ResidualEncoderUNet(deep_supervision=True),
    "resencunet_ds": lambda: ResidualEncoderUNet(1, 3, (8, 16, 32, 32), (1, 2, 2, 2), (1, 3, 4, 6),
                                                 deep_supervision=True),
    # Stage 1 pools and projects its skip (8 -> 16), stage 3 only pools it (32 -> 32), as
    # the M preset's last stage (320 -> 320).
    "resencunet": lambda: ResidualEncoderUNet(1, 3, (8, 16, 32, 32), (1, 2, 2, 2), (1, 3, 4, 6)),
    "conv_maxpool": lambda: ConvMaxPool(),
    "basicunet": lambda: BasicUNet(1, 2, (4, 4, 8, 8, 16, 4)),
    "segresnet_deconv": lambda: SegResNet(1, 2, 8, upsample_mode="deconv"),
    "segresnet": lambda: SegResNet(1, 2, 8),
    "resize_linear": lambda: ConvResize("trilinear", False, (2, 3, 1)),
    "resize_corners": lambda: ConvResize("trilinear", True, (3, 1, 2)),
    "resize_nearest": lambda: ConvResize("nearest", None, (2, 1, 3)),
    "resize_sizes": lambda: ConvResize("trilinear", False, size=(5, 9, 4)),
    "channels_last": lambda: ChannelsLast(),
}
