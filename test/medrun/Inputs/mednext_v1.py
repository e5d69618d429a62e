"""MedNeXt v1 as MIC-DKFZ defines it (nnunet_mednext/network_architecture/mednextv1:
blocks.py, MedNextV1.py, create_mednext_v1.py; run/load_weights.py for UpKern), 3d and
norm_type 'group': the same classes, module names, registration order, dummy_tensor and
forward, so that a state_dict that loads here strictly loads there. Test helper: the
reference our exported weights are checked against.
"""
import warnings

import torch
import torch.nn as nn
import torch.utils.checkpoint as checkpoint


class MedNeXtBlock(nn.Module):
    def __init__(self, in_channels, out_channels, exp_r=4, kernel_size=7, do_res=True,
                 norm_type='group', n_groups=None, dim='3d', grn=False):
        super().__init__()
        assert dim == '3d' and norm_type == 'group'
        self.do_res = do_res
        self.dim = dim
        self.conv1 = nn.Conv3d(in_channels, in_channels, kernel_size, stride=1,
                               padding=kernel_size // 2,
                               groups=in_channels if n_groups is None else n_groups)
        self.norm = nn.GroupNorm(num_groups=in_channels, num_channels=in_channels)
        self.conv2 = nn.Conv3d(in_channels, exp_r * in_channels, kernel_size=1, stride=1, padding=0)
        self.act = nn.GELU()
        self.conv3 = nn.Conv3d(exp_r * in_channels, out_channels, kernel_size=1, stride=1, padding=0)
        self.grn = grn
        if grn:
            self.grn_beta = nn.Parameter(torch.zeros(1, exp_r * in_channels, 1, 1, 1), requires_grad=True)
            self.grn_gamma = nn.Parameter(torch.zeros(1, exp_r * in_channels, 1, 1, 1), requires_grad=True)

    def forward(self, x, dummy_tensor=None):
        x1 = self.conv1(x)
        x1 = self.act(self.conv2(self.norm(x1)))
        if self.grn:
            gx = torch.norm(x1, p=2, dim=(-3, -2, -1), keepdim=True)
            nx = gx / (gx.mean(dim=1, keepdim=True) + 1e-6)
            x1 = self.grn_gamma * (x1 * nx) + self.grn_beta + x1
        x1 = self.conv3(x1)
        if self.do_res:
            x1 = x + x1
        return x1


class MedNeXtDownBlock(MedNeXtBlock):
    def __init__(self, in_channels, out_channels, exp_r=4, kernel_size=7, do_res=False,
                 norm_type='group', dim='3d', grn=False):
        super().__init__(in_channels, out_channels, exp_r, kernel_size, do_res=False,
                         norm_type=norm_type, dim=dim, grn=grn)
        self.resample_do_res = do_res
        if do_res:
            self.res_conv = nn.Conv3d(in_channels, out_channels, kernel_size=1, stride=2)
        self.conv1 = nn.Conv3d(in_channels, in_channels, kernel_size, stride=2,
                               padding=kernel_size // 2, groups=in_channels)

    def forward(self, x, dummy_tensor=None):
        x1 = super().forward(x)
        if self.resample_do_res:
            x1 = x1 + self.res_conv(x)
        return x1


class MedNeXtUpBlock(MedNeXtBlock):
    def __init__(self, in_channels, out_channels, exp_r=4, kernel_size=7, do_res=False,
                 norm_type='group', dim='3d', grn=False):
        super().__init__(in_channels, out_channels, exp_r, kernel_size, do_res=False,
                         norm_type=norm_type, dim=dim, grn=grn)
        self.resample_do_res = do_res
        self.dim = dim
        if do_res:
            self.res_conv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size=1, stride=2)
        self.conv1 = nn.ConvTranspose3d(in_channels, in_channels, kernel_size, stride=2,
                                        padding=kernel_size // 2, groups=in_channels)

    def forward(self, x, dummy_tensor=None):
        x1 = super().forward(x)
        # Asymmetry but necessary to match shape
        x1 = torch.nn.functional.pad(x1, (1, 0, 1, 0, 1, 0))
        if self.resample_do_res:
            res = self.res_conv(x)
            res = torch.nn.functional.pad(res, (1, 0, 1, 0, 1, 0))
            x1 = x1 + res
        return x1


class OutBlock(nn.Module):
    def __init__(self, in_channels, n_classes, dim):
        super().__init__()
        self.conv_out = nn.ConvTranspose3d(in_channels, n_classes, kernel_size=1)

    def forward(self, x, dummy_tensor=None):
        return self.conv_out(x)


class MedNeXt(nn.Module):
    def __init__(self, in_channels, n_channels, n_classes, exp_r=4, kernel_size=7,
                 enc_kernel_size=None, dec_kernel_size=None, deep_supervision=False,
                 do_res=False, do_res_up_down=False, checkpoint_style=None,
                 block_counts=[2, 2, 2, 2, 2, 2, 2, 2, 2], norm_type='group', dim='3d', grn=False):
        super().__init__()
        self.do_ds = deep_supervision
        assert checkpoint_style in [None, 'outside_block']
        self.inside_block_checkpointing = False
        self.outside_block_checkpointing = checkpoint_style == 'outside_block'
        if kernel_size is not None:
            enc_kernel_size = kernel_size
            dec_kernel_size = kernel_size
        self.stem = nn.Conv3d(in_channels, n_channels, kernel_size=1)
        if type(exp_r) == int:
            exp_r = [exp_r for i in range(len(block_counts))]
        C = n_channels

        def stage(c, i, k):
            return nn.Sequential(*[MedNeXtBlock(c, c, exp_r[i], k, do_res, norm_type, dim=dim, grn=grn)
                                   for _ in range(block_counts[i])])

        # Registration order as in MedNextV1.py: it is the state_dict's order.
        self.enc_block_0 = stage(C, 0, enc_kernel_size)
        self.down_0 = MedNeXtDownBlock(C, 2 * C, exp_r[1], enc_kernel_size, do_res_up_down, norm_type, dim)
        self.enc_block_1 = stage(2 * C, 1, enc_kernel_size)
        self.down_1 = MedNeXtDownBlock(2 * C, 4 * C, exp_r[2], enc_kernel_size, do_res_up_down, norm_type, dim, grn=grn)
        self.enc_block_2 = stage(4 * C, 2, enc_kernel_size)
        self.down_2 = MedNeXtDownBlock(4 * C, 8 * C, exp_r[3], enc_kernel_size, do_res_up_down, norm_type, dim, grn=grn)
        self.enc_block_3 = stage(8 * C, 3, enc_kernel_size)
        self.down_3 = MedNeXtDownBlock(8 * C, 16 * C, exp_r[4], enc_kernel_size, do_res_up_down, norm_type, dim, grn=grn)
        self.bottleneck = stage(16 * C, 4, dec_kernel_size)
        self.up_3 = MedNeXtUpBlock(16 * C, 8 * C, exp_r[5], dec_kernel_size, do_res_up_down, norm_type, dim, grn=grn)
        self.dec_block_3 = stage(8 * C, 5, dec_kernel_size)
        self.up_2 = MedNeXtUpBlock(8 * C, 4 * C, exp_r[6], dec_kernel_size, do_res_up_down, norm_type, dim, grn=grn)
        self.dec_block_2 = stage(4 * C, 6, dec_kernel_size)
        self.up_1 = MedNeXtUpBlock(4 * C, 2 * C, exp_r[7], dec_kernel_size, do_res_up_down, norm_type, dim, grn=grn)
        self.dec_block_1 = stage(2 * C, 7, dec_kernel_size)
        self.up_0 = MedNeXtUpBlock(2 * C, C, exp_r[8], dec_kernel_size, do_res_up_down, norm_type, dim, grn=grn)
        self.dec_block_0 = stage(C, 8, dec_kernel_size)
        self.out_0 = OutBlock(C, n_classes, dim)
        # Used to fix PyTorch checkpointing bug
        self.dummy_tensor = nn.Parameter(torch.tensor([1.]), requires_grad=True)
        if deep_supervision:
            self.out_1 = OutBlock(2 * C, n_classes, dim)
            self.out_2 = OutBlock(4 * C, n_classes, dim)
            self.out_3 = OutBlock(8 * C, n_classes, dim)
            self.out_4 = OutBlock(16 * C, n_classes, dim)
        self.block_counts = block_counts

    def iterative_checkpoint(self, sequential_block, x):
        for l in sequential_block:
            x = checkpoint.checkpoint(l, x, self.dummy_tensor)
        return x

    def forward(self, x):
        ck = self.outside_block_checkpointing
        seq = self.iterative_checkpoint if ck else (lambda s, v: s(v))
        one = (lambda m, v: checkpoint.checkpoint(m, v, self.dummy_tensor)) if ck else (lambda m, v: m(v))
        x = self.stem(x)
        x_res_0 = seq(self.enc_block_0, x)
        x = one(self.down_0, x_res_0)
        x_res_1 = seq(self.enc_block_1, x)
        x = one(self.down_1, x_res_1)
        x_res_2 = seq(self.enc_block_2, x)
        x = one(self.down_2, x_res_2)
        x_res_3 = seq(self.enc_block_3, x)
        x = one(self.down_3, x_res_3)
        x = seq(self.bottleneck, x)
        if self.do_ds:
            x_ds_4 = one(self.out_4, x)
        x = seq(self.dec_block_3, x_res_3 + one(self.up_3, x))
        if self.do_ds:
            x_ds_3 = one(self.out_3, x)
        x = seq(self.dec_block_2, x_res_2 + one(self.up_2, x))
        if self.do_ds:
            x_ds_2 = one(self.out_2, x)
        x = seq(self.dec_block_1, x_res_1 + one(self.up_1, x))
        if self.do_ds:
            x_ds_1 = one(self.out_1, x)
        x = seq(self.dec_block_0, x_res_0 + one(self.up_0, x))
        x = one(self.out_0, x)
        if self.do_ds:
            return [x, x_ds_1, x_ds_2, x_ds_3, x_ds_4]
        return x


VARIANTS = {  # create_mednext_v1.py: exp_r, block_counts, checkpoint_style
    'S': (2, [2] * 9, None),
    'B': ([2, 3, 4, 4, 4, 4, 4, 3, 2], [2] * 9, None),
    'M': ([2, 3, 4, 4, 4, 4, 4, 3, 2], [3, 4, 4, 4, 4, 4, 4, 4, 3], 'outside_block'),
    'L': ([3, 4, 8, 8, 8, 8, 8, 4, 3], [3, 4, 8, 8, 8, 8, 8, 4, 3], 'outside_block'),
}


def create_mednext_v1(num_input_channels, num_classes, model_id, kernel_size=3,
                      deep_supervision=False):
    exp_r, block_counts, style = VARIANTS[model_id]
    return MedNeXt(in_channels=num_input_channels, n_channels=32, n_classes=num_classes,
                   exp_r=exp_r, kernel_size=kernel_size, deep_supervision=deep_supervision,
                   do_res=True, do_res_up_down=True, block_counts=block_counts,
                   checkpoint_style=style)


def upkern_load_weights(network, pretrained_net, align_corners=None):
    """run/load_weights.py: kernels of another spatial size are resized with
    F.interpolate(mode='trilinear') (align_corners None, i.e. False, as there; the argument
    only lets a test show that the choice matters)."""
    pretrained_dict = pretrained_net.state_dict()
    model_dict = network.state_dict()
    for k in model_dict.keys():
        if k in model_dict.keys() and k in pretrained_dict.keys():
            if 'bias' in k or 'norm' in k or 'dummy' in k:
                model_dict[k] = pretrained_dict[k]
            else:
                inc1, outc1, *spatial_dims1 = model_dict[k].shape
                inc2, outc2, *spatial_dims2 = pretrained_dict[k].shape
                assert inc1 == inc2
                assert outc1 == outc2
                if spatial_dims1 == spatial_dims2:
                    model_dict[k] = pretrained_dict[k]
                else:
                    model_dict[k] = torch.nn.functional.interpolate(
                        pretrained_dict[k], size=spatial_dims1, mode='trilinear',
                        align_corners=align_corners)
        else:
            warnings.warn("Key %s will not be loaded." % k)
    network.load_state_dict(model_dict)
    return network
