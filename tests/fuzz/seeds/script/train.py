import os
# os.environ["CUDA_VISIBLE_DEVICES"] = "7"   (a comment: not code)
print("os.environ['CUDA_VISIBLE_DEVICES'] = '9'")  # a string that only looks like code
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
import torch
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "1")
x = torch.zeros(3).cuda()
os.environ['CUDA_VISIBLE_DEVICES'] = '2'
os.environ["CUDA_VISBLE_DEVICES"] = "0"
model = torch.nn.DataParallel(model, device_ids=[0, 1, 2])
y = x.to("cuda:3")
torch.cuda.set_device(1)
s = """docstring with "cuda:5" inside"""
